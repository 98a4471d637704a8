// Package session is the session log (service "session"): one
// append-only event log per agent, and the model history derived from it.
//
// Every step of the agent loop is recorded as events with contiguous
// sequence numbers. The conversation sent to the model is never stored on its
// own: it is derived from the log by Derive, event by event, so replaying a
// log yields the identical history. Each append is also emitted as a
// session/event in the agent's scope. The step is the unit of durability:
// the loop awaits the session/flush checkpoint, where persistence plugins
// hook in, once a turn's prompt is recorded, as each tool call starts
// (before it runs), at the end of every step that continues and at the
// turn's end, so a crash loses at most the step in flight. A
// checkpoint that succeeded is announced as session/durable, the event
// live streams follow. Stream chunks are not events: the loop records the
// assembled assistant message.
//
// A persistence backend may also list its sessions without loading their
// logs (Lister: id, agent, title, created, updated, turns, state) and delete
// them (Deleter); Store.List and Store.Delete use them, and refuse with
// SESSION_UNSUPPORTED when the backend cannot.
package session

import (
	"fmt"
	"slices"
	"time"

	"github.com/dsh-go/dsh/services/llm"
)

// Type names an event.
type Type string

// Event types, in the order a turn produces them.
const (
	TurnStart        Type = "turn/start"
	UserMessage      Type = "user/message"
	StepStart        Type = "step/start"
	AssistantMessage Type = "assistant/message"
	ToolCall         Type = "tool/call"
	ToolResult       Type = "tool/result"
	SteeringMessage  Type = "steering/message"
	StepEnd          Type = "step/end"
	TurnEnd          Type = "turn/end"

	// Compacted replaces the older part of the history with a summary:
	// the history derived so far becomes the summary message (Message)
	// followed by the last Compaction.Kept messages, unchanged. Written by
	// a compaction plugin (session.compact) before a model request.
	Compacted Type = "history/compacted"

	// MessageDropped records a message that was accepted into the inbox
	// and never reached a turn: a cancel (or the session's close) dropped
	// it. Message is the dropped message, RequestID its sender's id,
	// Reason "cancelled" or "closed", By who did it, Turn the turn that
	// was running (0 before any). Every accepted message ends in exactly
	// one user/message, steering/message or message/dropped. It is not
	// part of the history. A cancel also withdraws the messages still on
	// their way through the admission stage: each is recorded here too,
	// reason "cancelled", whatever admission would have decided. (A
	// message admission turned away never entered the inbox;
	// MessageRefused and MessageExpired record it.)
	MessageDropped Type = "message/dropped"

	// MessageRefused records a message with a request id that the
	// admission stage refused: Message is the message as it was built
	// (never in the inbox), RequestID its sender's id, Reason the refusing
	// plugin's reason ("admission/rate-limited") and Error its message to
	// the sender. A retry of the request id is answered with this refusal
	// instead of being decided again. Not part of the history.
	MessageRefused Type = "message/refused"
	// MessageExpired is MessageRefused for a message whose wait in the
	// admission stage ran out (the ready gate's timeout, a reload's hold
	// limit) rather than one a check turned down.
	MessageExpired Type = "message/expired"

	// MessageQueued records a message with a request id that was accepted
	// into the inbox while a turn ran, before its sender is told so: the
	// inbox is memory, and a sender answered "accepted" must not lose its
	// message to a crash. Message is the message, RequestID its sender's
	// id. It is no outcome — the user/message, steering/message or
	// message/dropped that follows for the same request id is — and not
	// part of the history. A log resumed with a message/queued that nothing
	// followed queues its message again, so it runs once.
	MessageQueued Type = "message/queued"

	// AssistantChunk is a stream chunk, which logs written before chunks
	// became agent/stream-chunk notifications hold. Nothing records it any
	// more; a log that has it still loads, and replay ignores it.
	AssistantChunk Type = "assistant/chunk"
)

// Known reports whether t is an event type of this version. A log with any
// other type is refused: skipping it could drop a message and leave the
// history invalid.
func (t Type) Known() bool {
	switch t {
	case TurnStart, UserMessage, StepStart, AssistantChunk, AssistantMessage,
		ToolCall, ToolResult, SteeringMessage, StepEnd, TurnEnd, Compacted, MessageDropped,
		MessageRefused, MessageExpired, MessageQueued, DecisionRecorded, Checkpointed, Rewound, Redone, PlanUpdated, GoalRecorded:
		return true
	}
	return false
}

// FinishCut is the finish of an assistant/message whose step was
// cancelled while it streamed: the message holds the text (and reasoning)
// that had arrived, kept because a person may have read it, and no tool
// calls. The history sends it to the model followed by CutNote.
const FinishCut llm.FinishReason = "cut"

// CutNote ends a cut answer in the history.
const CutNote = "\n\n[cut off here: the user stopped this answer]"

// Event is one entry of a session log. Fields that do not apply to the type
// are empty. Pointer fields are shared with the log: read them, never write
// them.
type Event struct {
	Seq  int64     `json:"seq"`
	Type Type      `json:"type"`
	Time time.Time `json:"time"`
	Turn int       `json:"turn,omitempty"`
	Step int       `json:"step,omitempty"`
	// Message is the message of user/message, assistant/message,
	// steering/message and tool/result.
	Message *llm.Message `json:"message,omitempty"`
	// Chunk is the chunk of assistant/chunk, in old logs only.
	Chunk *llm.Chunk `json:"chunk,omitempty"`
	// ToolCall is the call of tool/call.
	ToolCall *llm.ToolCall `json:"tool_call,omitempty"`
	// Usage is the usage of assistant/message.
	Usage *llm.Usage `json:"usage,omitempty"`
	// Provider and Model name what answered an assistant/message, as the
	// step's request asked (Model is empty when the agent left the choice
	// to its provider); logs written before they were recorded lack them.
	Provider string `json:"provider,omitempty"`
	Model    string `json:"model,omitempty"`
	// Finish is the finish reason of assistant/message.
	Finish llm.FinishReason `json:"finish,omitempty"`
	// Reason is why a turn ended (turn/end), why a message was dropped
	// (message/dropped) or the refusal's reason (message/refused, /expired).
	Reason string `json:"reason,omitempty"`
	// Error describes a failure that ended a turn, or the refusal of
	// message/refused and message/expired.
	Error string `json:"error,omitempty"`
	// RequestID is the sender's id of an admitted message, so retries can
	// be recognized from the log.
	RequestID string `json:"request_id,omitempty"`
	// By says who cancelled, for message/dropped.
	By string `json:"by,omitempty"`
	// Compaction describes a history/compacted event; its Message is the
	// summary and its Usage that of the summary request.
	Compaction *Compaction `json:"compaction,omitempty"`
	// Decision is the record of a decision event.
	Decision *Decision `json:"decision,omitempty"`
	// Checkpoint is the record of a checkpoint event.
	Checkpoint *Checkpoint `json:"checkpoint,omitempty"`
	// Rewind is the record of a rewind or redo event.
	Rewind *Rewind `json:"rewind,omitempty"`
	// Plan is the plan state after a plan/updated event.
	Plan *PlanState `json:"plan,omitempty"`
	// Goal is the record of a goal event.
	Goal *Goal `json:"goal,omitempty"`
}

// Compaction is what a history/compacted event did.
type Compaction struct {
	// Summarized is how many history messages the summary replaced, and
	// Turns how many user turns they held.
	Summarized int `json:"summarized"`
	Turns      int `json:"turns,omitempty"`
	// Kept is how many of the latest messages stay verbatim after the
	// summary.
	Kept int `json:"kept"`
	// Before and After are the estimated prompt tokens of the history
	// before and after; SummaryTokens those of the summary message.
	Before        int `json:"before,omitempty"`
	After         int `json:"after,omitempty"`
	SummaryTokens int `json:"summary_tokens,omitempty"`
	// Manual is set when a person or program asked for the compaction.
	Manual bool `json:"manual,omitempty"`
}

// String says what the compaction did, for people: "compacted 43 turns
// (120 messages) into 1.2k tokens".
func (c Compaction) String() string {
	return fmt.Sprintf("compacted %s (%s) into %s tokens; %s kept",
		count(c.Turns, "turn"), count(c.Summarized, "message"), kilo(c.SummaryTokens), count(c.Kept, "recent message"))
}

// count writes "1 turn" or "2 turns".
func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// kilo writes n as 950, 1.2k or 34k.
func kilo(n int) string {
	switch {
	case n < 1000:
		return fmt.Sprint(n)
	case n < 10000:
		return fmt.Sprintf("%.1fk", float64(n)/1000)
	}
	return fmt.Sprintf("%dk", (n+500)/1000)
}

// clone returns a copy sharing no pointers with e.
func (e Event) clone() Event {
	if e.Message != nil {
		m := e.Message.Clone()
		e.Message = &m
	}
	if e.Chunk != nil {
		c := *e.Chunk
		if c.ToolCall != nil {
			tc := *c.ToolCall
			c.ToolCall = &tc
		}
		if c.Usage != nil {
			u := *c.Usage
			c.Usage = &u
		}
		e.Chunk = &c
	}
	if e.ToolCall != nil {
		tc := *e.ToolCall
		e.ToolCall = &tc
	}
	if e.Usage != nil {
		u := *e.Usage
		e.Usage = &u
	}
	if e.Compaction != nil {
		c := *e.Compaction
		e.Compaction = &c
	}
	if e.Decision != nil {
		d := *e.Decision
		if d.Source != nil {
			src := *d.Source
			src.Principal, src.OnBehalfOf = clonePrincipal(src.Principal), clonePrincipal(src.OnBehalfOf)
			d.Source = &src
		}
		e.Decision = &d
	}
	if e.Checkpoint != nil {
		c := *e.Checkpoint
		c.Paths = slices.Clone(c.Paths)
		c.Blobs = slices.Clone(c.Blobs)
		c.Excluded = slices.Clone(c.Excluded)
		e.Checkpoint = &c
	}
	if e.Rewind != nil {
		r := *e.Rewind
		r.Blobs = slices.Clone(r.Blobs)
		r.Differed = slices.Clone(r.Differed)
		e.Rewind = &r
	}
	if e.Plan != nil {
		p := e.Plan.Clone()
		e.Plan = &p
	}
	if e.Goal != nil {
		g := e.Goal.clone()
		e.Goal = &g
	}
	return e
}

// Derive applies one event to a history log: the single rule that turns the
// event log into the conversation sent to the model.
func Derive(log *llm.Log, e Event) {
	switch e.Type {
	case AssistantMessage:
		if e.Message == nil {
			return
		}
		m := *e.Message
		if e.Finish == FinishCut {
			// The model is told what it said before it was stopped, and
			// that it was stopped there: it must not take the half
			// answer for a finished one.
			m.Content += CutNote
		}
		log.Append(m)
	case UserMessage, SteeringMessage, ToolResult:
		if e.Message != nil {
			log.Append(*e.Message)
		}
	case Compacted:
		if e.Message == nil || e.Compaction == nil {
			return
		}
		h := log.View()
		kept := h.Slice(h.Len()-min(max(e.Compaction.Kept, 0), h.Len()), h.Len())
		var fresh llm.Log
		fresh.Append(*e.Message)
		for _, m := range kept.All() {
			fresh.Append(m)
		}
		*log = fresh
	}
}

func clonePrincipal(p *llm.Principal) *llm.Principal {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}

// Reasons of a message/dropped event.
const (
	// DroppedCancelled: a cancel of the session took the message — from
	// the inbox, or on its way there through the admission stage.
	DroppedCancelled = "cancelled"
	// DroppedClosed: the session was closed with the message in its inbox.
	DroppedClosed = "closed"
)
