// Package bundle reads plugin bundles in the shared format — Claude Code's
// plugin directory (.claude-plugin/plugin.json, or the Open Plugins
// location .plugin/plugin.json) with its skills, commands, hooks, MCP
// servers and agents — and Claude Code's project-scope .mcp.json files.
//
// It only reads and checks: it resolves every path against the bundle root
// (refusing one that leaves it), expands ${CLAUDE_PLUGIN_ROOT} and ${VAR}
// as Claude Code does, and reports what it cannot mount. Turning a bundle
// into dsh's own plugin entries, so admission, approval and the sandbox
// apply to each part, is host/config's job.
package bundle
