// Package nodump closes a plugin's process to the other processes of its
// user, as dsh closes its own (internal/nodump in the dsh module): a hook,
// an MCP server or another plugin runs as the same user and could
// otherwise read the plugin's /proc/<pid>/environ (go-plugin's mTLS
// certificate), mem (its key, the secrets in its config) and fd, or ptrace
// it. A root process still passes.
package nodump
