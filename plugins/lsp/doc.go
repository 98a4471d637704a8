// Package lsp is the tools.lsp plugin: code intelligence from language servers
// (gopls, typescript-language-server, pyright, ...) for the agents it
// serves.
//
// Servers are configured by file type (command, args, file globs, root
// markers) and started lazily, the first time a file of theirs is edited
// or looked up, as child processes through internal/childproc (the
// minimal environment, their own process group, a bounded start). One
// server runs per configured entry and project root: the nearest folder
// at or above the file, inside the workspace, holding a root marker.
// dsh speaks LSP's JSON-RPC to it over stdio (go.lsp.dev/jsonrpc2 and
// go.lsp.dev/protocol).
//
// Two things use the servers:
//
//   - After every successful write and edit (a tools/execute listener),
//     the file is synced to its server and the server's next
//     publishDiagnostics for that version is awaited, bounded by
//     diagnostics_wait. The errors that were not there before the call
//     (compared by message, source and code, not by position, since an
//     edit moves lines) are appended to the tool's result, capped at
//     max_diagnostics. The model sees what its edit broke, and only that.
//   - The tools lsp_definition, lsp_references, lsp_hover and
//     lsp_symbols answer from the server.
//
// A server that exits is restarted on next use, after a back-off that
// doubles with each crash in a row (restart_backoff up to
// restart_backoff_max) and resets once a server stayed up for
// restart_stable. A server whose command is not installed is reported
// once, with code LSP_SERVER_MISSING, and not looked for again.
package lsp
