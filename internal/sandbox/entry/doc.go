// Package entry is the child's side of the sandbox: the code that runs in
// a process dsh started from its own executable with a marker argument,
// sets up the namespaces' view (read-only mounts, the writable
// directories, a fresh /proc), restricts itself (Landlock, no capabilities,
// no_new_privs, another uid) and replaces itself with the command.
//
// It imports the standard library only, on purpose. Go initializes
// packages in dependency order and, among those ready, in import-path
// order, so a package with no third-party dependency runs its init before
// dsh's heavy packages (gRPC, the config loader, the model adapters) are
// initialized. The entry recognizes its marker there and never returns,
// so a sandboxed command pays for a Go runtime start, not for dsh's
// start-up. Package sandbox is the parent's side.
package entry
