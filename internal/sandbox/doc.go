// Package sandbox is dsh's side of the sandbox a bash command runs in: a
// boundary built of Linux features, not a filter.
//
// A sandboxed command starts as dsh's own executable run again with a
// marker argument, as the first process of new user, PID, mount, IPC and
// UTS namespaces (and a network namespace unless the network is on).
// Package entry recognizes the marker in an init function, before dsh's
// heavy packages are initialized, builds the command's view and execs the
// program: everything read-only but the writable directories, the
// protected paths read-only again inside them, a /proc of the new PID
// namespace, Landlock, no capabilities, no_new_privs.
//
// When dsh runs as root the command must not keep kernel uid 0: in a user
// namespace without a mapping it would show as nobody yet still own every
// file root owns. It runs as uid 0 of a namespace that maps it to an
// unprivileged kernel uid (65534 by default), and the writable
// directories are idmapped mounts dsh prepares (open_tree and
// mount_setattr, through a user namespace with the same mapping), so what
// the command writes lands on disk as root's. A directory only root may
// enter on the way to them, the working directory or $HOME (/root) is
// masked: the command sees a read-only tmpfs there holding only the way
// to those places and, of $HOME, git's configuration (Rules.HomeFiles),
// so what else dsh keeps there, keys and tokens, stays out of its reach.
//
// Nothing is downgraded silently: Probe finds out what this kernel and
// container allow (by entering a sandbox for real, once per process),
// Status.Check says what a set of Rules would lose, Rules.Accept says what
// the caller accepts to lose, and Status.Describe names what is then not
// isolated. The child enforces exactly what dsh chose and, if it cannot,
// reports why over the control socket and never runs the program.
package sandbox
