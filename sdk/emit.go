package sdk

import (
	stdctx "context"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// The notifications a plugin can hear, by name. They are read-only: the
// host has moved on by the time a plugin reads one.
const (
	StatusEvent            = "agent/status"
	StreamChunkEvent       = "agent/stream-chunk"
	SessionEventEvent      = "session/event"
	SessionOutcomeEvent    = "session/outcome"
	ApprovalRequestedEvent = "approval/requested"
	ApprovalAnsweredEvent  = "approval/answered"
)

type (
	// StatusChange is the payload of agent/status.
	StatusChange = pluginv1.StatusChange
	// StreamChunk is the payload of agent/stream-chunk.
	StreamChunk = pluginv1.StreamChunk
	// SessionAppended is the payload of session/event.
	SessionAppended = pluginv1.SessionAppended
	// SessionOutcome is the payload of session/outcome.
	SessionOutcome = pluginv1.SessionOutcome
	// ApprovalRequest is the payload of approval/requested.
	ApprovalRequest = pluginv1.ApprovalRequest
	// ApprovalAnswered is the payload of approval/answered.
	ApprovalAnswered = pluginv1.ApprovalAnswered
)

// typedEmit registers fn for event with the payload field get picks; a
// payload without it is the protocol mismatch badPayload describes.
func typedEmit[T any](p *Plugin, event, field string, get func(*pluginv1.Payload) *T, fn func(stdctx.Context, *T) error) {
	p.Emit(event, func(ctx stdctx.Context, call Call) error {
		v := get(call.Payload)
		if v == nil {
			return badPayload(call, field)
		}
		return fn(ctx, v)
	})
}

// OnStatus listens to agent/status.
func (p *Plugin) OnStatus(fn func(ctx stdctx.Context, s *StatusChange) error) {
	typedEmit(p, StatusEvent, "status", (*pluginv1.Payload).GetStatus, fn)
}

// OnStreamChunk listens to agent/stream-chunk: every piece of the model's
// answer as it arrives, in order. The host sends them in batches to a Go
// plugin, so a fast stream costs the connection a message per few dozen
// chunks; fn still sees them one by one.
func (p *Plugin) OnStreamChunk(fn func(ctx stdctx.Context, c *StreamChunk) error) {
	typedEmit(p, StreamChunkEvent, "stream_chunk", (*pluginv1.Payload).GetStreamChunk, fn)
}

// OnSessionEvent listens to session/event: every event appended to an
// agent's session log.
func (p *Plugin) OnSessionEvent(fn func(ctx stdctx.Context, e *SessionAppended) error) {
	typedEmit(p, SessionEventEvent, "session_event", (*pluginv1.Payload).GetSessionEvent, fn)
}

// OnSessionOutcome listens to session/outcome: what happened to a client's
// request that the session log does not record, such as a refused prompt.
func (p *Plugin) OnSessionOutcome(fn func(ctx stdctx.Context, o *SessionOutcome) error) {
	typedEmit(p, SessionOutcomeEvent, "session_outcome", (*pluginv1.Payload).GetSessionOutcome, fn)
}

// OnApprovalRequested listens to approval/requested: a person is being
// asked whether a call may run.
func (p *Plugin) OnApprovalRequested(fn func(ctx stdctx.Context, r *ApprovalRequest) error) {
	typedEmit(p, ApprovalRequestedEvent, "approval_requested", (*pluginv1.Payload).GetApprovalRequested, fn)
}

// OnApprovalAnswered listens to approval/answered: an ask ended, answered
// or not.
func (p *Plugin) OnApprovalAnswered(fn func(ctx stdctx.Context, a *ApprovalAnswered) error) {
	typedEmit(p, ApprovalAnsweredEvent, "approval_answered", (*pluginv1.Payload).GetApprovalAnswered, fn)
}
