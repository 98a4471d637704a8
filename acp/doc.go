// Package acp is dsh's entry point for editors: an agent of the Agent
// Client Protocol (JSON-RPC over stdio, github.com/coder/acp-go-sdk) whose
// every session is a session of the session controller.
//
// It never makes or feeds agents itself: session/new and session/load open
// and resume through services/sessions, session/prompt delivers through
// Session.Prompt (source kind acp, the JSON-RPC id as request id), steering
// through Session.Steer, and the session/update stream is the session's
// live hub (services/sessions/live) translated update by update. The
// approval stage's questions reach the editor as session/request_permission
// because the server attaches to the hub as an approving client.
//
// A prompt's blocks become the parts of one message (content.go): text,
// images, embedded resources (text or blob) and the files resource_links
// name inside the session's cwd, read confined to it. initialize
// advertises images only when Options.Accepts says the configured agent's
// provider takes them, and a prompt's image or document the provider
// cannot take is refused before it is delivered. A prompt of text only
// (text blocks, text resources, links) travels as text, as before.
//
// initialize advertises only what works on the loaded config: session/load,
// /resume and /list only when the session store can do them
// (capabilities.go). The editor's MCP servers become tools.mcp entries of
// the session's agent; one that does not start leaves the session open
// without it, and the editor is told (mcp.go).
//
// The ACP modes (read-only, workspace-write, full-access) are an approval
// policy the server prepends in each session agent's scope: switching mode
// only changes which calls it lets through, asks about or refuses, so it
// takes effect on the next call without reopening the agent.
package acp
