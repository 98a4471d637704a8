package usage

import (
	stdctx "context"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/session"
)

// Tracker keeps the live totals of one session: it reads the log the
// session already holds (a resumed session's included) and then follows
// its session/event notifications. Safe for concurrent use.
type Tracker struct {
	mu   sync.Mutex
	acc  *Account
	seq  int64 // the last event accounted for
	stop func()
}

// Track starts a tracker on the session of the agent whose scope is at.
// Stop it with Stop.
func Track(at *dshctx.Context, s *session.Session, acc *Account) (*Tracker, error) {
	t := &Tracker{acc: acc}
	// Subscribe first, then read the log: an event appended in between is
	// seen twice and counted once, by its sequence number.
	off, err := session.EventAppended.On(at, func(_ stdctx.Context, a session.Appended) error {
		t.add(a.Event)
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.stop = off
	for _, e := range s.Events(0) {
		t.add(e)
	}
	return t, nil
}

func (t *Tracker) add(e session.Event) {
	// Only what Counted accepts changes the totals; those events are
	// appended one after another, so their sequence numbers only grow.
	if !Counted(e) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e.Seq != 0 && e.Seq <= t.seq {
		return
	}
	t.seq = e.Seq
	t.acc.Add(e)
}

// Stop ends the tracking; the totals stay readable.
func (t *Tracker) Stop() {
	if t.stop != nil {
		t.stop()
	}
}

// Snapshot returns the totals so far.
func (t *Tracker) Snapshot() Snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return SnapshotOf(t.acc)
}
