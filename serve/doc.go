// Package serve is the HTTP entry point of dsh (`dsh serve`): sessions over a
// JSON API, their live events as Server-Sent Events, approvals answered by a
// plain REST call, an OpenAPI document describing all of it, and the
// embedded web page at "/".
//
// # How it reaches the agents
//
// Only through the session service (sessions.Service, Options.Sessions),
// and only through its interface: it opens and resumes sessions, prompts
// and steers them with the client's request id (so a retried POST is
// delivered once), cancels and closes them, and attaches streams to them.
// The service is the host's controller, or a cluster's that forwards each
// call to the host running the session; the handlers cannot tell which.
// Admission therefore governs every prompt that comes over HTTP, and a
// refusal is answered 422 with the refusing plugin's code, reason and
// message.
//
// # Sessions live on the server
//
// A session opened here keeps running when no client watches it
// (sessions.OpenOptions.KeepRunning): a browser that reloads, a script
// that posts and polls later, both find it where they left it. It ends by
// POST .../close or at Shutdown. The server holds one approving client of
// each session it opened (or a cluster had it adopt), so a tool call that
// asks waits for an answer from any client — a stream's page or a REST
// call — and survives a page reload.
//
// # Streams
//
// GET .../stream is the live hub's event contract over SSE: the durable
// events after the client's Last-Event-ID (from the hub's memory or the
// store), then the message being streamed, then everything live. A stream
// that falls behind the hub's buffer re-attaches itself from its last seq
// (the service's Stream does), so a slow client sees contiguous seqs,
// never a gap. A client that leaves more than Options.StreamBuffer unread
// (its socket's send queue) is sent a drop message naming the last id it
// was sent and the stream ends; one whose write blocks past
// Options.StreamWriteTimeout has its connection cut. Either way it holds
// no goroutine or kernel buffer beyond those bounds, and resumes with
// Last-Event-ID. A cluster's service streams a session open on another host
// from the shared log: its durable events only, each once stored, with
// the ids a local stream gives them.
//
// # Security
//
// Every /v1 route but health wants the bearer token (compared in constant
// time); the page, its assets, /openapi.json and /hooks/ (which check
// their own HMAC) do not. Bodies are bounded, CORS is off unless
// serve.cors_origins lists the origin, and neither the token nor any
// header is ever written to a response or the log. Callers are told apart
// (their principal and tenant reach the log, policies and budgets) and
// tenants are kept apart: a session belongs to its creator's tenant,
// recorded with its log, and a caller with a tenant reaches its tenant's
// sessions only — every route with a session id goes through one check
// (scoped) that answers any other session as a missing one — while a
// caller without a tenant is an operator and reaches all. A request id names
// one message; reused by another caller or for other text it is refused.
package serve
