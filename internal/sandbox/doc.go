// Package sandbox confines a child process with Landlock, the Linux
// security module an unprivileged process can use to restrict itself and
// every process it starts.
//
// Landlock restricts the thread that asks for it, and whatever that thread
// executes, so the rules cannot be applied from dsh to an already started
// child, nor from dsh to itself (dsh must keep writing its sessions).
// Instead the child is dsh's own executable run again with a marker
// argument: this package's init function recognizes it before main runs
// (and before a test binary's flags are parsed), applies the rules to the
// one thread it locks, and replaces the process with the real program
// (execve), which keeps the rules. A test binary that links this package
// re-executes itself the same way.
//
// The rules are fixed: reads and execution are allowed everywhere; writes
// only beneath the directories Rules.Writable names (and to /dev/null and
// its kin); with Rules.Network false, TCP bind and connect, unix sockets
// created outside the sandbox and abstract unix sockets are refused, as far
// as the kernel's Landlock ABI can restrict them. Signals to processes
// outside the sandbox (dsh itself among them) are refused from ABI 6 on.
//
// Nothing is downgraded silently: the parent probes the kernel (Probe),
// decides with Status.Check whether the rules can be enforced as asked,
// and passes the exact ABI to use; the child applies that ABI strictly
// and, if it cannot, reports why through a pipe and never runs the
// program.
package sandbox
