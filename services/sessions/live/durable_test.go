package live_test

import (
	stdctx "context"
	"errors"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/dsh-go/dsh/waterfall"
)

// An event goes to clients only once a checkpoint stored it: while the
// store fails, an appended event is neither sent nor counted in LastSeq,
// and the checkpoint that stores it sends it.
func TestAnEventIsSentOnlyOnceDurable(t *testing.T) {
	a := newAgent(t)
	a.turn(1, 1, nil)
	h := newHub(t, a, live.Options{})
	c, err := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: h.LastSeq()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Detach()
	failing := true
	off, err := session.EventFlush.On(a.scope, func(ctx stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		if failing {
			return struct{}{}, errors.New("the store is down")
		}
		return next.Call(ctx, f)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer off()
	stored := h.LastSeq()
	e := a.append(session.Event{Type: session.TurnStart, Turn: 2})
	if h.LastSeq() != stored {
		t.Fatalf("LastSeq() = %d after an event the store refused; want %d", h.LastSeq(), stored)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 50*time.Millisecond)
	u, err := c.Next(ctx)
	cancel()
	if err == nil {
		t.Fatalf("the client got %+v before the event was stored", u)
	}
	failing = false
	if err := a.sess.Flush(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if u := next(t, c); u.Kind != live.KindEvent || u.Seq != e.Seq {
		t.Fatalf("after the checkpoint the client got %+v; want event %d", u, e.Seq)
	}
}
