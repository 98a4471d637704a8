// Package childproc is the one way dsh starts a process on behalf of its
// config: plugin binaries, MCP stdio servers, hooks and bash.
// Every child gets the same three guarantees.
//
// Environment: a child sees only the base variables (BaseEnv: PATH, HOME,
// USER, LOGNAME, LANG, LANGUAGE, LC_*, TMPDIR, TZ) copied from dsh's
// environment, then the names its config lists in env_passthrough, then its
// config's env, which wins. Secrets in dsh's environment — the provider API
// keys above all — reach a child only when its config names them.
//
// Process group: a child leads a process group of its own (Setpgid), and
// teardown signals the whole group, so a wrapper script's children die with
// it and cannot hold its pipes open after it exited.
//
// Bounded teardown: Stop sends SIGTERM to the group, waits a bounded grace
// for the child to exit, then sends SIGKILL to the group, and waits at most
// one more grace; it never waits on a process outside the group.
//
// When dsh itself is killed outright (SIGKILL, a crash) no teardown runs.
// On Linux the kernel then sends SIGKILL to the direct child (Pdeathsig).
// Its own children are not signalled by the kernel; instead every child
// inherits the read end of a pipe whose only write end dsh holds, named by
// the variable HostFDEnv. The pipe reads end-of-file the moment dsh is gone,
// whoever the reader is; the Go plugin SDK watches it and kills its process
// group then, which takes the plugin's own children with it. A child that
// does not watch the pipe and starts processes of its own leaves those
// running when dsh is SIGKILLed (its direct process still dies).
//
// The watcher races the kernel: the pipe reads end-of-file when dsh's
// descriptors close, and Pdeathsig may kill the direct child before its
// watcher acts, leaving the group's other members alive. A child that must
// not leave processes behind watches from a member of its group that is
// not the direct child: WatchHost (the Go SDK) and the Python SDK both
// start a small /bin/sh watcher in the child's group for this.
package childproc
