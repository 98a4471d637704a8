// Package sessions is the session controller (service "sessions"):
// the one layer between every entry point — the CLI, ACP, an HTTP server,
// webhooks, schedules, subagents — and the agents.
//
// # What an entry point does
//
// It opens a session (Controller.Open: which configured agent, presets,
// workspace, session id, model overrides) or resumes one
// (Controller.Resume), lists, pages, finds and deletes persisted ones
// (List, ListPage, Find, Delete, via the Catalog), and talks to an open one through its record: Prompt, Steer
// and Cancel, each prompt with a request id so a retry never delivers
// twice. Clients Attach to receive the live events (through the Hub) and
// Detach when they go; the caller of Open owns the session until it calls
// Session.Detach. Refusals come back as session errors with stable codes
// (PromptRejected, Closed, NotFound), matched by code, never by Go type,
// so they survive JSON between processes; every refusal is also kept as an
// Outcome on the session (Session.Outcomes, EventOutcome) for a client that
// reconnects and missed the answer.
//
// Every request id ends in one outcome recorded in the session log —
// delivered or merged into turn N, dropped, refused or expired — and a
// retry of it is answered with that outcome, so every entry point answers
// retries alike; Session.RequestOutcome reads it (see Fate and
// docs/sessions.md).
//
// A prompt may carry images and files (PromptRequest.Parts, bytes in
// Data). The session stores them in the attachments service when the
// delivery's turn comes and the log records references; a prompt that
// stays out releases them, and deleting a session releases its own (see
// services/attachments).
//
// # What an entry point does not do
//
// It never calls the agents factory (Registry.Create/Resume), the agent
// controller's Deliver, an agent's Followup/Steer or a handle's Dispose:
// those belong to the controller, the agent loop and the Opener, and a
// test (services/agentcontroller/onlypath_test.go) fails on any other
// caller. It does not mount presets (the Opener does, as one operation
// with creating the agent), deduplicate, map refusals or tear down.
//
// # Teardown
//
// Closing a session disposes exactly its agent: the loop stops,
// quiescence is awaited, the closing turn/end is written, the agent is
// unregistered and its in-memory session removed; siblings are untouched.
// An open or resume whose owner goes away before it finishes (its ctx ends
// or the controller is disposed) disposes the handle it got before failing,
// so nothing is left orphaned. Disposing the controller closes every
// session it opened. When the last owner detaches the session closes,
// unless it was opened with KeepRunning (a server session nobody watches).
//
// # The live event contract
//
// Durable events (the session log) carry sequence numbers; streamed chunks
// are transient notifications naming the message they build and their
// index in it. A client attaching with its last sequence number gets the
// durable events after it, then a snapshot of the message being streamed,
// then the following chunks: no gap, no duplicate. This replaces recording
// every chunk in the log: there a 10 KB answer cost the session 526 KB of
// log, while only the finished message needs to be durable. The Hub
// (services/sessions/live) implements the contract.
package sessions
