package session

import (
	stdctx "context"
	"fmt"
	"github.com/dsh-go/dsh/telemetry"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
)

// Codes of the session log.
const (
	// SessionExists: a session id is already in use.
	SessionExists errs.Code = "SESSION_EXISTS"
	// NoPersistence: resuming needs a persistence backend and none is loaded.
	NoPersistence errs.Code = "SESSION_NO_PERSISTENCE"
	// FlushFailed: a session/flush listener failed at a turn end.
	FlushFailed errs.Code = "SESSION_FLUSH_FAILED"
	// BadLog: a log to replay is not contiguous or not well formed.
	BadLog errs.Code = "SESSION_BAD_LOG"
	// NotFound: the persistence backend holds no session with that id.
	NotFound errs.Code = "SESSION_NOT_FOUND"
)

// Appended is the payload of session/event.
type Appended struct {
	Session *Session
	Event   Event
}

// Flush is the payload of session/flush: everything up to and including
// Seq should be made durable.
type Flush struct {
	Session *Session
	Seq     int64
}

// Events of the session log, dispatched in the session's agent scope.
var (
	// EventAppended is emitted after every append.
	EventAppended = waterfall.NewEmit[Appended]("session/event")
	// EventFlush is the checkpoint the agent loop awaits after recording a
	// turn's prompt, as each tool call starts (before it runs), at the
	// end of every step that continues and at the turn's end.
	// Persistence listeners write, then call next; an error is reported
	// through agent/error and does not stop the agent.
	EventFlush = waterfall.New[Flush, struct{}]("session/flush", nil)
	// EventDurable is emitted once a checkpoint succeeded: every event up
	// to Seq is stored by every persistence listener (or, with none, is
	// as durable as it will get). What shows the log to others — live
	// streams — sends an event only once it is durable, so a crash never
	// takes back an event a client saw under its seq.
	EventDurable = waterfall.NewEmit[Flush]("session/durable")
)

// Session is one agent's event log.
type Session struct {
	id      string
	agentID string
	at      *dshctx.Context
	// tenant is the tenant the session belongs to (SetTenant); persistence
	// writes it beside the agent, so every store and host can tell.
	tenant string

	mu sync.Mutex
	// events is the log in fixed-size pages: appending never copies earlier
	// events, however long the session grows.
	events  [][]Event
	n       int
	history deriver
	// requests maps the RequestID of every recorded outside message to the
	// message id: derived from the log like the history, so it survives a
	// resume.
	requests map[string]string
	// recorded maps the RequestID of every recorded outside message to
	// the seq of the event that recorded what became of it.
	recorded map[string]int64

	// lease is the backend's hold on the session, nil without a Locker.
	lease Lease
	// closing: the agent is being disposed; the id is not free yet.
	closing bool
	// interrupted is set when the restored log ended inside a turn.
	interrupted *Interruption
	// durable is the seq up to which the log is stored: the last
	// successful checkpoint's, or the restored log's end.
	durable int64
	// lastDecision is the digest of the latest decision record, which the
	// next one chains to; derived from the log, so a resume continues the
	// chain. signer signs new records, nil when the host signs none.
	lastDecision string
	// firstGoal is the seq of the log's first goal record, 0 when none:
	// where the session service starts reading a goal on resume.
	firstGoal int64
	signer    *Signer
}

const pageSize = 256

// push appends e to the paged log; the caller holds mu.
func (s *Session) push(e Event) {
	last := len(s.events) - 1
	if last < 0 || len(s.events[last]) == pageSize {
		// The first page starts small and grows by appending, so a fresh
		// session costs a few events, not a full page; later pages are
		// made whole, so a long session never copies what it holds.
		size := pageSize
		if last < 0 {
			size = 16
		}
		s.events = append(s.events, make([]Event, 0, size))
		last++
	}
	s.events[last] = append(s.events[last], e)
	s.n++
}

// index records what the log derives besides the history; the caller holds
// mu.
func (s *Session) index(e Event) {
	if e.Type == GoalRecorded && s.firstGoal == 0 {
		s.firstGoal = e.Seq
	}
	if e.Type == DecisionRecorded {
		if e.Decision != nil {
			s.lastDecision = e.Decision.Digest
		}
		return
	}
	if e.Type == Rewound || e.Type == Redone {
		// A rewind or redo changes which earlier events the history
		// holds: derived anew from the log, as a replay would.
		s.history = rederive(s.n, s.event)
		return
	}
	s.history.apply(e)
	if e.RequestID != "" && e.Message != nil {
		if s.requests == nil {
			s.requests = map[string]string{}
		}
		s.requests[e.RequestID] = e.Message.ID
		if s.recorded == nil {
			s.recorded = map[string]int64{}
		}
		s.recorded[e.RequestID] = e.Seq
	}
}

// Outcome returns the event that recorded what became of the message sent
// with requestID: user/message or steering/message (delivered in its
// turn) or message/dropped.
func (s *Session) Outcome(requestID string) (Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seq, ok := s.recorded[requestID]
	if !ok {
		return Event{}, false
	}
	return s.event(int(seq - 1)).clone(), true
}

// Dropped returns the message/dropped event of requestID, when the message
// sent with it was accepted and then dropped, so a retry is answered with
// what happened to it rather than accepted again.
func (s *Session) Dropped(requestID string) (Event, bool) {
	ev, ok := s.Outcome(requestID)
	if !ok || ev.Type != MessageDropped {
		return Event{}, false
	}
	return ev, true
}

// Request returns the id of the recorded message that was delivered with
// requestID.
func (s *Session) Request(requestID string) (messageID string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	messageID, ok = s.requests[requestID]
	return messageID, ok
}

// event returns event i (0-based); the caller holds mu.
func (s *Session) event(i int) *Event { return &s.events[i/pageSize][i%pageSize] }

// ID returns the session id.
func (s *Session) ID() string { return s.id }

// AgentID returns the id of the agent the session belongs to.
func (s *Session) AgentID() string { return s.agentID }

// SetTenant records the tenant the session belongs to, before its first
// event, so persistence stores it with the log's first record (and, in
// stores that keep metadata per record, with every one). An empty tenant
// changes nothing: a tenant once given is never taken away by an opener
// that does not know it.
func (s *Session) SetTenant(tenant string) {
	if tenant == "" {
		return
	}
	s.mu.Lock()
	s.tenant = tenant
	s.mu.Unlock()
}

// Tenant is the tenant SetTenant recorded; empty for an operator's
// session.
func (s *Session) Tenant() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tenant
}

// Append records e with the next sequence number and the current time,
// updates the derived history and emits session/event. It returns the event
// as stored.
//
// session/event is emitted after the lock is released, so listeners hear
// events in sequence order only because one goroutine appends to a session
// (the agent's driver). A caller that appends from several goroutines must
// serialize its appends, or persistence would write them out of order.
func (s *Session) Append(ctx stdctx.Context, e Event) Event {
	// The span is started and ended here rather than in a wrapper: an
	// Event is large, and a second frame copying it made the agent's
	// fresh goroutine grow its stack once more per turn (+3 µs CPU).
	var t appendTrace
	if telemetry.Enabled() {
		ctx, t = s.startAppend(ctx, e.Type)
	}
	s.mu.Lock()
	e.Seq = int64(s.n) + 1
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	s.push(e)
	s.index(e)
	s.mu.Unlock()
	EventAppended.Emit(ctx, s.at, Appended{Session: s, Event: e})
	if t.span != nil {
		t.end(e.Seq)
	}
	return e
}

// FirstGoal returns the seq of the log's first goal event, 0 when the
// session never had a goal.
func (s *Session) FirstGoal() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstGoal
}

// Len returns the number of events.
func (s *Session) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// Events returns copies of the events from seq from (1-based) on.
func (s *Session) Events(from int64) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	if from < 1 {
		from = 1
	}
	if from > int64(s.n) {
		return nil
	}
	out := make([]Event, 0, int64(s.n)-from+1)
	for i := int(from - 1); i < s.n; i++ {
		out = append(out, s.event(i).clone())
	}
	return out
}

// History returns the conversation derived from the log, read-only.
func (s *Session) History() llm.History {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.history.log.View()
}

// Flush runs the session/flush checkpoint for everything appended so far
// and, once it succeeded, emits session/durable.
func (s *Session) Flush(ctx stdctx.Context) error {
	if telemetry.Enabled() {
		return s.flushTraced(ctx)
	}
	return s.flush(ctx)
}

func (s *Session) flush(ctx stdctx.Context) error {
	seq := int64(s.Len())
	if _, err := EventFlush.Dispatch(ctx, s.at, Flush{Session: s, Seq: seq}); err != nil {
		return err
	}
	s.mu.Lock()
	advanced := seq > s.durable
	if advanced {
		s.durable = seq
	}
	s.mu.Unlock()
	if advanced {
		// Two checkpoints racing (a dispose's and the driver's) may emit
		// out of order; a listener takes the highest seq it heard.
		EventDurable.Emit(ctx, s.at, Flush{Session: s, Seq: seq})
	}
	return nil
}

// Durable returns the seq up to which the log is stored: events after it
// may still be lost to a crash.
func (s *Session) Durable() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.durable
}

// Lease returns the backend's hold on the session, or nil. Persistence
// plugins key their writes by it, never by the session id alone.
func (s *Session) Lease() Lease { return s.lease }

// Interrupted reports the turn the restored log left open, which the
// restore closed with reason interrupted, and the prompt that started it.
func (s *Session) Interrupted() (Interruption, bool) {
	if s.interrupted == nil {
		return Interruption{}, false
	}
	in := *s.interrupted
	in.Prompt = in.Prompt.Clone()
	return in, true
}

// Replay derives the history of a log, checking that it is contiguous,
// that every event has a known type and that every tool result answers a
// call an assistant message made.
func Replay(events []Event) (llm.History, error) {
	var d deriver
	asked := map[string]bool{}
	for i, e := range events {
		if e.Seq != int64(i)+1 {
			return llm.History{}, errs.New(BadLog, fmt.Sprintf(
				"event %d of the log has seq %d; a session log starts at 1 and has no gaps", i, e.Seq))
		}
		if !e.Type.Known() {
			return llm.History{}, errs.New(BadLog, fmt.Sprintf(
				"event %d of the log has the unknown type %q; it was written by another version of dsh or edited by hand", e.Seq, e.Type))
		}
		switch {
		case e.Type == AssistantMessage && e.Message != nil:
			for _, c := range e.Message.ToolCalls {
				asked[c.ID] = true
			}
		case e.Type == ToolResult && e.Message != nil:
			if !asked[e.Message.ToolCallID] {
				return llm.History{}, errs.New(BadLog, fmt.Sprintf(
					"event %d of the log is a result for tool call %q that no assistant message made; the log lost events", e.Seq, e.Message.ToolCallID))
			}
			delete(asked, e.Message.ToolCallID)
		case e.Type == Rewound || e.Type == Redone:
			d = rederive(i+1, func(j int) *Event { return &events[j] })
			continue
		}
		d.apply(e)
	}
	return d.log.View(), nil
}
