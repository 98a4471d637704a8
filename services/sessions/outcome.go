package sessions

import (
	"errors"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/waterfall"
)

// OutcomeKind names a session-visible outcome.
type OutcomeKind string

// Outcome kinds.
const (
	// OutcomePromptRejected: a prompt or steering message did not enter
	// the inbox. Its request id, code, reason and message say which and
	// why.
	OutcomePromptRejected OutcomeKind = "session/prompt-rejected"
)

// Outcome is what happened to a client's request that the session log does
// not record: a rejected prompt never becomes a session event, yet a client
// that re-attaches must learn it. The last few are kept per session (see
// Session.Outcomes) and emitted as EventOutcome in the agent's scope, where
// the live hub forwards them to attached clients.
type Outcome struct {
	Kind      OutcomeKind `json:"type"`
	Session   string      `json:"session"`
	RequestID string      `json:"request_id,omitempty"`
	Code      errs.Code   `json:"code"`
	Reason    string      `json:"reason,omitempty"`
	Message   string      `json:"message"`
	Presented bool        `json:"presented"`
	// Fate is what became of the request: refused or expired (dropped
	// when the session closed).
	Fate Fate      `json:"outcome,omitempty"`
	At   time.Time `json:"at"`

	// AgentID is the session's agent, for a listener on the root that
	// hears every agent's outcomes (a plugin binary's notification).
	AgentID string `json:"-"`
}

// EventOutcome is emitted in the agent's scope for every Outcome.
var EventOutcome = waterfall.NewEmit[Outcome]("session/outcome")

// keptOutcomes bounds the outcomes a session remembers for re-attaching
// clients: enough for a burst of refused retries, small enough to copy.
const keptOutcomes = 16

// ring keeps the last keptOutcomes outcomes; the zero value is empty and
// allocates nothing, as most sessions never see a refusal.
type ring struct {
	buf  []Outcome
	next int
	n    int
}

func (r *ring) add(o Outcome) {
	if r.buf == nil {
		r.buf = make([]Outcome, keptOutcomes)
	}
	r.buf[r.next] = o
	r.next = (r.next + 1) % keptOutcomes
	if r.n < keptOutcomes {
		r.n++
	}
}

// list returns the kept outcomes, oldest first.
func (r *ring) list() []Outcome {
	out := make([]Outcome, 0, r.n)
	start := (r.next - r.n + keptOutcomes) % keptOutcomes
	for i := range r.n {
		out = append(out, r.buf[(start+i)%keptOutcomes])
	}
	return out
}

// outcomeOf describes a delivery error as an outcome; ok is false for an
// error that is not a refusal (a cancelled sender, a failing Prepare).
func outcomeOf(sessionID, requestID string, err error) (Outcome, bool) {
	e, ok := errors.AsType[*errs.Error](err)
	if !ok || (e.Code != PromptRejected && e.Code != Closed) {
		return Outcome{}, false
	}
	o := Outcome{Kind: OutcomePromptRejected, Session: sessionID, RequestID: requestID, Code: e.Code, Reason: e.Reason, Message: e.Message, At: time.Now()}
	if r, ok := RejectionOf(err); ok {
		o.Presented, o.Fate = r.Presented, r.Outcome
	}
	if o.Fate == "" {
		o.Fate = FateRefused
		if e.Code == Closed {
			o.Fate = FateDropped
		}
	}
	return o, true
}
