package live_test

import (
	stdctx "context"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions/live"
)

func TestNoticesReachAttachedClientsAndLaterOnes(t *testing.T) {
	a := newAgent(t)
	h := newHub(t, a, live.Options{Notices: 2})
	now := attach(t, h, "now", false)
	a.turn(1, 2, nil)
	for _, id := range []string{"r1", "r2", "r3"} {
		h.Notice(live.Notice{Type: "session/prompt-rejected", RequestID: id, Code: "SESSION_PROMPT_REJECTED", Reason: "agent/busy"})
	}
	var r replica
	readUntil(t, now, &r, h.LastSeq())
	for _, id := range []string{"r1", "r2", "r3"} {
		if u := next(t, now); u.Kind != live.KindNotice || u.Notice.RequestID != id || u.Notice.AfterSeq != h.LastSeq() {
			t.Fatalf("live notice %s: %+v", id, u)
		}
	}
	// A client attaching later gets the last two, after its backlog.
	later := attach(t, h, "later", false)
	var r2 replica
	readUntil(t, later, &r2, h.LastSeq())
	for _, id := range []string{"r2", "r3"} {
		if u := next(t, later); u.Kind != live.KindNotice || u.Notice.RequestID != id {
			t.Fatalf("retained notice %s: %+v", id, u)
		}
	}
	// One that holds notice 2 already gets only notice 3.
	c, _ := h.Attach(stdctx.Background(), live.AttachOptions{AfterSeq: h.LastSeq(), AfterNotice: 2})
	if u := next(t, c); u.Kind != live.KindNotice || u.Notice.ID != 3 {
		t.Fatalf("after notice 2: %+v", u)
	}
}

func TestDisposingTheAgentClosesItsClients(t *testing.T) {
	a := newAgent(t)
	h := newHub(t, a, live.Options{})
	c := attach(t, h, "tab", false)
	if err := a.scope.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Next(stdctx.Background()); !errs.HasCode(err, live.HubClosed) || !strings.Contains(err.Error(), "disposed") {
		t.Fatalf("after the agent's scope ended: %v", err)
	}
}

// Appends from several goroutines are heard out of order; clients still
// get them in sequence, once each.
func TestConcurrentAppendsArriveInOrder(t *testing.T) {
	a := newAgent(t)
	h := newHub(t, a, live.Options{Window: 16, Buffer: 4096})
	c := attach(t, h, "tab", false)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				a.append(session.Event{Type: session.StepStart})
			}
		}()
	}
	wg.Wait()
	var r replica
	readUntil(t, c, &r, 800)
	sameLog(t, r.events, a.sess)
	if h.LastSeq() != 800 {
		t.Fatalf("hub at %d", h.LastSeq())
	}
}

func TestLoaderFailureIsReportedAndRetried(t *testing.T) {
	a := newAgent(t)
	a.turn(1, 1, nil)
	fail := true
	h := newHub(t, a, live.Options{Window: 2, Load: func(_ stdctx.Context, from, to int64) ([]session.Event, error) {
		if fail {
			return nil, errs.New("STORE_DOWN", "the store is down")
		}
		return a.sess.Events(from)[:to-from+1], nil
	}})
	a.turn(2, 1, nil)
	a.turn(3, 1, nil)
	a.turn(4, 1, nil)
	c := attach(t, h, "tab", false)
	if _, err := c.Next(stdctx.Background()); !errs.HasCode(err, live.LoadFailed) {
		t.Fatalf("load failure: %v", err)
	}
	fail = false
	var r replica
	readUntil(t, c, &r, h.LastSeq())
	sameLog(t, r.events, a.sess)
}
