// Package acp is dsh's entry point for editors: an agent of the Agent
// Client Protocol (JSON-RPC over stdio, github.com/coder/acp-go-sdk) whose
// every session is a session of the session controller.
//
// It holds sessions, never agents: it imports no agent package and goes
// through sessions.Service alone. session/new, /load and /resume are
// Service.Ensure (create, or existing only: a session another client of
// this process has open is refused rather than shared), session/prompt is
// Service.Prompt (source kind acp, the JSON-RPC id as request id) answered
// once Turn.Wait says what became of it and the pump has sent the updates
// up to there, steering is Service.Steer, and the session/update stream is
// the session's Stream, which attaches itself again when a slow editor
// falls behind, translated update by update. session/list is
// Service.ListPage, its cursor the page's. The approval stage's
// questions reach the editor as session/request_permission because the
// stream answers approvals.
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
// What must run in the session's agent — the ACP modes and the editor's
// files — gets there as the session's own plugin entry, acp.session
// (link.go), linked by its config to the connection's state in this
// process. The modes (read-only, workspace-write, full-access) are an
// approval policy it prepends in the agent's scope: switching mode only
// changes which calls it lets through, asks about or refuses, so it takes
// effect on the next call without reopening the agent. The link is
// in-process: a session service that opened the agent in another process
// refuses the entry (ReasonNoLink) rather than run it without its mode.
package acp
