// Package mcp is the `tools.mcp` plugin: a client of one Model Context Protocol
// server per config entry, over stdio (a child process) or streamable
// HTTP. The server's tools are registered with the tools service of the
// entry's scope as `server__tool`, so they go through the same validation,
// approval and scheduling as built-in tools; the registry follows the
// server's notifications/tools/list_changed, and a server that crashes or
// disconnects is restarted with backoff. A tool's images come back as
// image parts of its result, which the agent loop keeps as attachments.
// docs/mcp.md is the user's reference.
package mcp
