package sessions

import (
	stdctx "context"
	"time"

	"github.com/dsh-go/dsh/errs"

	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// Service is the session service: the one door every entry point — the
// CLI, ACP, the HTTP server, webhooks, schedules, subagents — goes through.
// It is location-transparent: sessions are named by id, and every value
// that crosses it is plain data that survives JSON, so an implementation
// may forward a call to the host that runs the session (a cluster) as
// well as serve it here (the Controller). Nothing in it hands out an
// agent, a scope or another in-process value.
//
// A session opened through Ensure runs until Close (or Delete, or the
// service's end): nobody owns it, so a client that goes away leaves it
// running for the next one.
type Service interface {
	// Ensure opens the session o names, resumes it when it is stored, or
	// joins it when it is open or being opened (a concurrent Ensure of the
	// same id waits for that open to end, then joins it or, if it failed,
	// tries itself). o.Mode narrows what it may do.
	Ensure(ctx stdctx.Context, o EnsureOptions) (Info, error)
	// Prompt queues a message for a turn, through admission, and returns
	// its Turn; a refusal is an error (PromptRejected, Closed) and is kept
	// as an Outcome. Without a request id one is made, so Wait works.
	Prompt(ctx stdctx.Context, sessionID string, r PromptRequest) (Turn, error)
	// Steer hands a message to the running turn, like Prompt otherwise.
	Steer(ctx stdctx.Context, sessionID string, r PromptRequest) (Turn, error)
	// Wait returns the recorded outcome of requestID once it is decided
	// and, when the message was delivered or merged into a turn, that
	// turn has ended (TurnResult.End). It fails with Closed when the
	// session closed with the request still undecided.
	Wait(ctx stdctx.Context, sessionID, requestID string) (TurnResult, error)
	// Attach starts a Stream of the session's live events (see the live
	// event contract); with o.Approvals the stream answers approvals.
	Attach(ctx stdctx.Context, sessionID string, o AttachOptions) (Stream, error)
	// Cancel drops what the session has queued, ends its running turn and
	// waits until it is idle or ctx ends. WithActor names who cancels.
	Cancel(ctx stdctx.Context, sessionID string) error
	// Idle waits until the session has nothing left to do — no turn
	// running, nothing queued — or ctx ends: a server's graceful stop.
	Idle(ctx stdctx.Context, sessionID string) error
	// Info describes an open session.
	Info(ctx stdctx.Context, sessionID string) (Info, error)
	// History returns the session's log events with Seq > afterSeq: from
	// memory while it is open, from the store when it is not.
	History(ctx stdctx.Context, sessionID string, afterSeq int64) ([]session.Event, error)
	// Outcome returns the recorded outcome of requestID; ok is false while
	// it is undecided or queued, or when it was never sent. A session not
	// open is answered from its stored log.
	Outcome(ctx stdctx.Context, sessionID, requestID string) (o RequestOutcome, ok bool, err error)
	// Attachment returns a part the session's log names by ref, with its
	// bytes: only what the session's own messages reference is readable,
	// so a hash learnt elsewhere reads nothing of another session.
	Attachment(ctx stdctx.Context, sessionID, ref string) (llm.Part, []byte, error)
	// Commands returns the prompt commands the open session offers
	// ("/name args" prompts its agent expands).
	Commands(ctx stdctx.Context, sessionID string) ([]PromptCommand, error)
	// Plan reads or changes the open session's plan mode, plan and todos
	// (see PlanRequest); NoPlanMode when its agent has none.
	Plan(ctx stdctx.Context, sessionID string, r PlanRequest) (session.PlanState, error)
	// Goal sets, shows, pauses, resumes or clears the session's goal (see
	// goal.go) where the session runs, and returns the goal after it.
	Goal(ctx stdctx.Context, sessionID string, r GoalRequest) (Goal, error)
	// List returns the stored sessions, the open ones marked open.
	List(ctx stdctx.Context) ([]session.Summary, error)
	// ListPage returns one page of the stored sessions (session.ListOptions:
	// one agent's, most recently updated first, after a cursor), marked
	// as List marks them; Next is the cursor of the page after it. An
	// implementation that forwards calls pages where the store is, so an
	// entry point never lists every session to show a few.
	ListPage(ctx stdctx.Context, opts session.ListOptions) (session.Page, error)
	// Find describes one stored session by id without listing the others
	// (a store's index, not a scan); found is false when nothing is stored
	// under the id or nothing is persisted at all.
	Find(ctx stdctx.Context, sessionID string) (sum session.Summary, found bool, err error)
	// Rewind takes an open, idle session back to before a turn or step —
	// its workspace, its conversation or both — or, with r.Redo, undoes
	// its last rewind. The rewind is recorded in the log (nothing is
	// erased). A workspace changed since its checkpoint is refused with
	// REWIND_WORKSPACE_CHANGED, naming what differs, unless r.Force.
	Rewind(ctx stdctx.Context, sessionID string, r RewindRequest) (RewindResult, error)
	// Close closes an open session: its agent ends, its log is flushed.
	Close(ctx stdctx.Context, sessionID string) error
	// Delete removes a stored session that is not open.
	Delete(ctx stdctx.Context, sessionID string) error
}

// EnsureMode narrows what Ensure may do.
type EnsureMode string

// Ensure modes.
const (
	// EnsureAny joins the session when open, resumes it when stored, and
	// otherwise creates it (under SessionID, or a fresh id).
	EnsureAny EnsureMode = ""
	// EnsureCreate only creates: a session open or opening under the id
	// is refused with SESSION_LOCKED (ReasonOpenHere).
	EnsureCreate EnsureMode = "create"
	// EnsureExisting joins or resumes and never creates: nothing stored
	// under the id fails with the store's SESSION_NOT_FOUND.
	EnsureExisting EnsureMode = "existing"
)

// EnsureOptions describe the session Ensure makes sure is open.
type EnsureOptions struct {
	OpenOptions
	Mode EnsureMode `json:"mode,omitempty"`
}

// How says what Ensure did.
type How string

// What Ensure did.
const (
	HowCreated How = "created"
	HowResumed How = "resumed"
	HowJoined  How = "joined"
)

// Info describes an open session: what entry points show and decide on.
type Info struct {
	ID string `json:"id"`
	// Agent is the configured agent (or template) the session runs;
	// AgentID the id its agent runs under.
	Agent   string `json:"agent"`
	AgentID string `json:"agent_id"`
	// How is what Ensure did; empty from Info.
	How How `json:"how,omitempty"`
	// Running says a turn runs; Pending counts the messages queued.
	Running bool `json:"running"`
	Pending int  `json:"pending"`
	// LastSeq is the seq of the log's last event; Turns the last turn's
	// number; Created and Updated the times of its first and last event.
	LastSeq int64     `json:"last_seq"`
	Turns   int       `json:"turns"`
	Created time.Time `json:"created,omitzero"`
	Updated time.Time `json:"updated,omitzero"`
	// Title is the first prompt, shortened.
	Title string `json:"title,omitempty"`
	// Messages counts the messages of the history sent to the model.
	Messages int `json:"messages"`
	// Interrupted is set when the log's last turn was cut short (dsh was
	// killed in it) before this open.
	Interrupted *session.Interruption `json:"interrupted,omitempty"`
	// Outcomes are the last refusals of the session's requests.
	Outcomes []Outcome `json:"outcomes,omitempty"`
	// Tools are the names of the tools the session's agent offers its
	// model, sorted: what an approval rule or an --allow can name.
	Tools []string `json:"tools,omitempty"`
	// Tenant is the tenant the session belongs to, as this copy knows it
	// (OpenOptions.Tenant, or none when its opener gave none: the stored
	// summary then says).
	Tenant string `json:"tenant,omitempty"`
}

// TurnResult is what became of a prompt: its recorded outcome and, when
// it was delivered or merged into a turn, that turn's end.
type TurnResult struct {
	RequestOutcome
	// End is the turn/end of the turn the message ran in; nil when it did
	// not run (dropped, refused, expired).
	End *session.Event `json:"end,omitempty"`
}

// Ran says the message ran in a turn that ended.
func (r TurnResult) Ran() bool { return r.End != nil }

// Turn is an accepted prompt: where it went and how to wait for it.
type Turn struct {
	Session   string `json:"session"`
	RequestID string `json:"request_id"`
	MessageID string `json:"message_id"`
	svc       Service
}

// NewTurn is for implementations of Service: the turn's Wait asks svc.
func NewTurn(svc Service, sessionID, requestID, messageID string) Turn {
	return Turn{Session: sessionID, RequestID: requestID, MessageID: messageID, svc: svc}
}

// Wait waits for the turn's recorded outcome; see Service.Wait.
func (t Turn) Wait(ctx stdctx.Context) (TurnResult, error) {
	return t.svc.Wait(ctx, t.Session, t.RequestID)
}

// Stream is one client's live view of a session (see the live event
// contract in the package doc). The local one re-attaches itself when the
// hub drops it for falling behind, from the last seq it returned: no gap,
// no duplicate. Next is for one goroutine; the others for any.
type Stream interface {
	// Next returns the next update, waiting until ctx ends. It fails with
	// live.HubClosed when the session closed, live.Detached after Close.
	Next(ctx stdctx.Context) (live.Update, error)
	// Answer answers approval question id (a stream attached with
	// Approvals); the first answer of any client wins.
	Answer(id int64, a approval.Answer) error
	// LastSeq is the seq of the last durable event Next returned.
	LastSeq() int64
	// Reattaches counts the times the stream attached itself again after
	// falling behind: a client too slow for the session.
	Reattaches() int
	// Close ends the stream.
	Close() error
}

// Update is one element of a Stream.
type Update = live.Update

// Who sends a prompt, as the agent controller records it: re-exported so
// entry points name sources without importing the agent packages.
type (
	Source     = agentcontroller.Source
	SourceKind = agentcontroller.SourceKind
	Principal  = agentcontroller.Principal
)

// Source kinds.
const (
	SourceUser     = agentcontroller.SourceUser
	SourceWebhook  = agentcontroller.SourceWebhook
	SourceSchedule = agentcontroller.SourceSchedule
	SourceSubagent = agentcontroller.SourceSubagent
	SourcePlugin   = agentcontroller.SourcePlugin
	SourceJob      = agentcontroller.SourceJob
)

// AgentOptions are an agent's base settings (OpenOptions.Options).
type AgentOptions = agents.Options

var _ Service = (*Controller)(nil)

// How a message enters the inbox (serve's Router names it).
type Mode = agentcontroller.Mode

// Delivery modes.
const (
	ModeFollowup = agentcontroller.Followup
	ModeSteer    = agentcontroller.Steer
)

// Refusal is the agent controller's refusal a PromptRejected error wraps;
// RejectedCode is its code, for a client that walks the causes.
type Refusal = agentcontroller.Refusal

// RejectedCode is the code of the agent controller's refusal.
const RejectedCode = agentcontroller.RejectedCode

// DroppedError is the error a retry of a request that a cancel dropped is
// answered with (AGENT_MESSAGE_DROPPED), from its recorded outcome.
func DroppedError(agentID string, o RequestOutcome) *errs.Error {
	ev := session.Event{Type: o.Type, Turn: o.Turn, Seq: o.Seq, RequestID: o.RequestID, Reason: o.Reason, By: o.By}
	if o.MessageID != "" {
		ev.Message = &llm.Message{ID: o.MessageID}
	}
	return agentcontroller.DroppedError(agentID, ev)
}
