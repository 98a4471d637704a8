// Package nodump closes dsh's own process to processes of the same user.
//
// dsh holds what its children must not have: the provider keys in its
// environment and memory, the serve token, the plugins' mTLS keys. A child
// started outside the sandbox (a hook, an MCP stdio server, a plugin
// binary, bash with sandbox.mode: off) runs as dsh's user and, by default,
// may read /proc/<dsh>/environ, mem, maps and fd, or ptrace dsh: the
// minimal environment childproc gives it would be for show. Marking the
// process non-dumpable hands those entries to root and refuses ptrace to
// anyone without CAP_SYS_PTRACE; it also stops core dumps, which would
// write the same secrets to disk.
//
// What it cannot do: keep out a child running as root (dsh as root with
// the sandbox off), which passes by its capabilities. dsh's children are
// not affected: execve makes a process dumpable again.
package nodump
