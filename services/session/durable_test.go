package session_test

import (
	stdctx "context"
	"errors"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
)

// session/durable follows the checkpoints that succeeded, never the
// appends: a failed checkpoint announces nothing, and the next one that
// succeeds announces everything up to its seq.
func TestDurableFollowsSuccessfulCheckpoints(t *testing.T) {
	root, _, s := newSession(t)
	var mu sync.Mutex
	var heard []int64
	fail := true
	session.EventDurable.On(root, func(_ stdctx.Context, f session.Flush) error {
		mu.Lock()
		heard = append(heard, f.Seq)
		mu.Unlock()
		return nil
	})
	session.EventFlush.On(root, func(c stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		if fail {
			return struct{}{}, errors.New("disk full")
		}
		return next.Call(c, f)
	})
	evs := conversation()
	for _, e := range evs[:3] {
		s.Append(stdctx.Background(), e)
	}
	if err := s.Flush(stdctx.Background()); err == nil {
		t.Fatal("the failing checkpoint succeeded")
	}
	if len(heard) != 0 || s.Durable() != 0 {
		t.Fatalf("a failed checkpoint announced %v; Durable() = %d", heard, s.Durable())
	}
	fail = false
	for _, e := range evs[3:5] {
		s.Append(stdctx.Background(), e)
	}
	if err := s.Flush(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	// Nothing new: a checkpoint that adds nothing announces nothing.
	s.Flush(stdctx.Background())
	if len(heard) != 1 || heard[0] != 5 || s.Durable() != 5 {
		t.Fatalf("announced %v; Durable() = %d; want [5] and 5", heard, s.Durable())
	}
}

// A restored log is durable as loaded.
func TestARestoredLogIsDurable(t *testing.T) {
	root, st, s := newSession(t)
	for _, e := range conversation() {
		s.Append(stdctx.Background(), e)
	}
	evs := s.Events(1)
	st.Close(s)
	scope, _ := root.Scoped("agent-2")
	r, err := st.Restore(scope, "agent-2", "s2", evs)
	if err != nil {
		t.Fatal(err)
	}
	if r.Durable() != int64(len(evs)) {
		t.Fatalf("Durable() = %d after restoring %d events", r.Durable(), len(evs))
	}
}
