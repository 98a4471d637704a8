package sessions

import (
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
)

// Fate names what became of one accepted request id. Each request id ends
// in exactly one, read from the one log event that recorded it (see the
// table in docs/sessions.md).
type Fate string

// Fates of a request.
const (
	// FateDelivered: the message started turn N (the first user/message
	// after its turn/start).
	FateDelivered Fate = "delivered"
	// FateMerged: the message joined turn N that another message started
	// — queued together with it (a later user/message of the same turn
	// start) or steered into the running turn (steering/message).
	FateMerged Fate = "merged"
	// FateDropped: a cancel or the session's close took the message from
	// the inbox before any turn, or a cancel withdrew it on its way
	// through admission (message/dropped).
	FateDropped Fate = "dropped"
	// FateRefused: admission turned the message away (message/refused).
	FateRefused Fate = "refused"
	// FateExpired: the message waited in admission until its limit ran
	// out (message/expired).
	FateExpired Fate = "expired"
)

// RequestOutcome is the recorded outcome of a request id: the log event
// that ended it and what it means.
type RequestOutcome struct {
	Outcome   Fate         `json:"outcome"`
	Type      session.Type `json:"type"`
	Turn      int          `json:"turn"`
	Seq       int64        `json:"seq"`
	RequestID string       `json:"request_id"`
	MessageID string       `json:"message_id"`
	// Reason is why it was dropped (cancelled or closed) or the refusal's
	// reason; By who cancelled; Message the refusal's text.
	Reason  string `json:"reason,omitempty"`
	By      string `json:"by,omitempty"`
	Message string `json:"message,omitempty"`
}

// RequestOutcome returns the recorded outcome of requestID in the session's
// log; ok is false while the request is undecided or queued (or was never
// sent). Every entry point answers a retry with it. A refusal or a
// withdrawal its sender was told of is one already while the driver has
// still to append it (during a running turn it does so at the turn's
// end): it is read from the agent controller then, as a retry's answer is,
// with no seq yet.
func (s *Session) RequestOutcome(requestID string) (RequestOutcome, bool) {
	log := s.handle.Agent.Session()
	if requestID == "" || log == nil {
		return RequestOutcome{}, false
	}
	// The controller's copy first: it goes only once the log holds it.
	pending, handed := s.c.deliver.Unwritten(s.handle.Agent.ID(), requestID)
	if o, ok := OutcomeInLog(log, requestID); ok || !handed {
		return o, ok
	}
	return outcomeOfEvent(requestID, pending, func() bool { return false }), true
}

// OutcomeInLog reads the outcome of requestID from log.
func OutcomeInLog(log *session.Session, requestID string) (RequestOutcome, bool) {
	if log == nil || requestID == "" {
		return RequestOutcome{}, false
	}
	ev, ok := log.Outcome(requestID)
	if !ok || ev.Type == session.MessageQueued {
		// Queued is the record of its acceptance: it waits for a turn.
		return RequestOutcome{}, false
	}
	return outcomeOfEvent(requestID, ev, func() bool { return startsTurn(log, ev.Seq) }), true
}

// outcomeInEvents reads the outcome of requestID from a stored log, as
// OutcomeInLog does from an open one: the last event that carries the
// request's message, as the log's index keeps it.
func outcomeInEvents(evs []session.Event, requestID string) (RequestOutcome, bool) {
	at := -1
	for i := range evs {
		if requestID != "" && evs[i].RequestID == requestID && evs[i].Message != nil {
			at = i
		}
	}
	if at < 0 || evs[at].Type == session.MessageQueued {
		return RequestOutcome{}, false
	}
	return outcomeOfEvent(requestID, evs[at], func() bool { return at > 0 && evs[at-1].Type == session.TurnStart }), true
}

// outcomeOfEvent describes ev, the event that ended requestID; starts
// says whether a user/message is the first of its turn.
func outcomeOfEvent(requestID string, ev session.Event, starts func() bool) RequestOutcome {
	o := RequestOutcome{Type: ev.Type, Turn: ev.Turn, Seq: ev.Seq, RequestID: requestID, Reason: ev.Reason, By: ev.By}
	if ev.Message != nil {
		o.MessageID = ev.Message.ID
	}
	switch ev.Type {
	case session.MessageDropped:
		o.Outcome = FateDropped
	case session.MessageRefused:
		o.Outcome, o.Message = FateRefused, ev.Error
	case session.MessageExpired:
		o.Outcome, o.Message = FateExpired, ev.Error
	case session.SteeringMessage:
		o.Outcome = FateMerged
	default:
		o.Outcome = FateDelivered
		if !starts() {
			o.Outcome = FateMerged
		}
	}
	return o
}

// startsTurn says whether the user/message at seq is the first of its
// turn: the event before it is the turn's start. Reading one event costs
// a copy of the log's tail, which a retry (rare) can afford.
func startsTurn(log *session.Session, seq int64) bool {
	evs := log.Events(seq - 1)
	return len(evs) > 0 && evs[0].Type == session.TurnStart
}

// outcomeDetails are the details of the agent controller's error that a
// session error keeps: what a retry's answer says of the recorded outcome.
var outcomeDetails = []string{"outcome", "expired", "recorded", "seq", "turn", "message_id"}

// fateOfError names the outcome a delivery error reports, "" when it
// reports none.
func fateOfError(err error) Fate { return Fate(agentcontroller.OutcomeOf(err)) }
