package sessions

import (
	stdctx "context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// A session's watch tells the callers of Wait that its log moved: one
// listener per session, on session/event in its agent's scope, instead of
// one per caller. It keeps the recent turn ends, so a waiter finds the end
// of its turn without copying the log's tail at every event.

// keptEnds bounds the turn ends a watch remembers: a waiter on an older
// turn reads the log instead.
const keptEnds = 64

type watch struct {
	// waiters counts the callers of Wait; an append wakes nobody, and
	// takes no lock, while it is zero.
	waiters atomic.Int64

	mu      sync.Mutex
	changed chan struct{}
	ends    map[int]session.Event
	// done closes when the session closed: the log moves no more.
	done chan struct{}
}

func newWatch() *watch {
	return &watch{changed: make(chan struct{}), ends: map[int]session.Event{}, done: make(chan struct{})}
}

// watching returns the session's watch, making it on the first call: its
// listener goes on before the caller's first look at the log, so no turn
// end falls between the two, and goes with the agent's scope. A session
// already closed gets a watch that says so.
func (s *Session) watching() (*watch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watch != nil {
		return s.watch, nil
	}
	w := newWatch()
	if s.state == stateClosed {
		close(w.done)
		s.watch = w
		return w, nil
	}
	log := s.handle.Agent.Session()
	_, err := session.EventAppended.On(s.handle.Agent.Context(), func(_ stdctx.Context, a session.Appended) error {
		if a.Session == log {
			w.appended(a.Event)
		}
		return nil
	})
	if err != nil {
		return nil, errs.Wrap(errs.CodeOf(err), err, fmt.Sprintf("session %q: cannot follow its log", s.id))
	}
	s.watch = w
	return w, nil
}

func (w *watch) appended(e session.Event) {
	if e.Type != session.TurnEnd && w.waiters.Load() == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e.Type == session.TurnEnd {
		w.ends[e.Turn] = e
		delete(w.ends, e.Turn-keptEnds)
	}
	close(w.changed)
	w.changed = make(chan struct{})
}

// next returns the channel the next append closes.
func (w *watch) next() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

func (w *watch) end(turn int) (session.Event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.ends[turn]
	return e, ok
}

// closed marks the log as final.
func (w *watch) closed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case <-w.done:
	default:
		close(w.done)
	}
}

// Wait returns the recorded outcome of requestID and, when it ran, its
// turn's end; see Service.Wait.
func (s *Session) Wait(ctx stdctx.Context, requestID string) (TurnResult, error) {
	if requestID == "" {
		return TurnResult{}, errs.New(errs.InvalidArgument, fmt.Sprintf("session %q: Wait needs the request id the prompt was sent with", s.id))
	}
	w, err := s.watching()
	if err != nil {
		return TurnResult{}, err
	}
	w.waiters.Add(1)
	defer w.waiters.Add(-1)
	log := s.handle.Agent.Session()
	scan := true // the first look and the last read the log itself
	for {
		changed := w.next()
		final := false
		select {
		case <-w.done:
			final, scan = true, true
		default:
		}
		if r, ok := s.settled(w, log, requestID, scan); ok {
			return r, nil
		}
		if final {
			return TurnResult{}, errs.New(Closed, fmt.Sprintf(
				"session %q closed before request %q was decided; resume the session and send it again with the same request id", s.id, requestID)).WithReason(ReasonClosedUndecided)
		}
		scan = false
		select {
		case <-changed:
		case <-w.done:
		case <-ctx.Done():
			return TurnResult{}, stdctx.Cause(ctx)
		}
	}
}

// settled returns the request's result once it is final: an outcome that
// kept the message out of any turn, or the end of the turn it ran in.
func (s *Session) settled(w *watch, log *session.Session, requestID string, scan bool) (TurnResult, bool) {
	o, ok := OutcomeInLog(log, requestID)
	if !ok {
		// A refusal that is not the message's recorded fate (a failing
		// admission check, a hold's limit, the agent gone) never reaches
		// the log; the session keeps it among its outcomes.
		return s.keptRefusal(requestID)
	}
	r := TurnResult{RequestOutcome: o}
	if o.Outcome != FateDelivered && o.Outcome != FateMerged {
		return r, true
	}
	if e, ok := w.end(o.Turn); ok {
		r.End = &e
		return r, true
	}
	if !scan {
		return TurnResult{}, false
	}
	for _, e := range log.Events(o.Seq) {
		if e.Type == session.TurnEnd && e.Turn == o.Turn {
			r.End = &e
			return r, true
		}
	}
	return TurnResult{}, false
}

// keptRefusal is the last refusal of requestID the session keeps.
func (s *Session) keptRefusal(requestID string) (TurnResult, bool) {
	if requestID == "" {
		return TurnResult{}, false
	}
	kept := s.Outcomes()
	for i := len(kept) - 1; i >= 0; i-- {
		if o := kept[i]; o.RequestID == requestID {
			return TurnResult{RequestOutcome: RequestOutcome{Outcome: o.Fate, RequestID: requestID, Reason: o.Reason, Message: o.Message}}, true
		}
	}
	return TurnResult{}, false
}
