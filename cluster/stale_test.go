package cluster_test

import (
	stdctx "context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestAHostThatLostItsLeaseStopsServingTheSession: host a stalled past
// lease_ttl (here its lease is removed under it) and host b took the
// session. A message reaching a must not be admitted into a's stale copy,
// whose writer is fenced and which b never sees: a closes its copy and
// forwards to b.
func TestAHostThatLostItsLeaseStopsServingTheSession(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	kv := leases(t, srv, stream)
	ss := a.open(t, "s1")
	if _, err := ss.Prompt(ctxT(t), sessions.PromptRequest{Content: "first"}); err != nil {
		t.Fatal(err)
	}
	a.prompts(t, "s1")
	if err := kv.Delete(ctxT(t), "s1"); err != nil { // a's lease is gone
		t.Fatal(err)
	}
	// Within a renewal (a third of the TTL) a finds its lease gone.
	time.Sleep(leaseTTL / 2)
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "via b"}); err != nil {
		t.Fatal(err)
	}
	if got := owner(t, kv, "s1"); got != "b" {
		t.Fatalf("the lease of s1 names %q after b claimed it", got)
	}
	if _, err := a.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "via a"}); err != nil {
		t.Fatalf("a message for s1 through a: %v", err)
	}
	if got := b.prompts(t, "s1"); !slices.Equal(got, []string{"first", "via b", "via a"}) {
		t.Fatalf("b's session holds the prompts %q", got)
	}
	if _, open := a.h.Sessions().Get("s1"); open {
		t.Fatal("a still has its stale copy of s1 open")
	}
}

// TestACloseIsForwarded: POST .../close on a host that does not run the
// session closes it where it runs; a session stored but open nowhere is
// closed already, one never stored is not found.
func TestACloseIsForwarded(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	ss := a.open(t, "s1")
	if _, err := ss.Prompt(ctxT(t), sessions.PromptRequest{Content: "first"}); err != nil {
		t.Fatal(err)
	}
	a.prompts(t, "s1")
	post := api(t, b)
	if status, out := post("/v1/sessions/s1/close", `{}`); status != http.StatusOK || out["open"] == true {
		t.Fatalf("closing through b: %d %v", status, out)
	}
	if _, open := a.h.Sessions().Get("s1"); open {
		t.Fatal("s1 still runs on a after a close through b")
	}
	if status, out := post("/v1/sessions/s1/close", `{}`); status != http.StatusOK {
		t.Fatalf("closing a closed session through b: %d %v", status, out)
	}
	if err := b.c.CloseSession(ctxT(t), "never"); !errs.HasCode(err, sessions.NotFound) {
		t.Fatalf("closing a session never stored: %v", err)
	}
}

// TestACloseOnAHostWithAStaleCopyIsRouted: host a lost the lease of s1 to
// b; a close sent to a closes the session where it runs now, b, and not
// only a's stale copy.
func TestACloseOnAHostWithAStaleCopyIsRouted(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	post := api(t, a)
	kv := leases(t, srv, stream)
	ss := a.open(t, "s1")
	if _, err := ss.Prompt(ctxT(t), sessions.PromptRequest{Content: "first"}); err != nil {
		t.Fatal(err)
	}
	a.prompts(t, "s1")
	if err := kv.Delete(ctxT(t), "s1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(leaseTTL / 2)
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "via b"}); err != nil {
		t.Fatal(err)
	}
	if status, out := post("/v1/sessions/s1/close", `{}`); status != http.StatusOK {
		t.Fatalf("close through a: %d %v", status, out)
	}
	if _, open := b.h.Sessions().Get("s1"); open {
		t.Error("s1 still runs on b after a close through a")
	}
	if _, open := a.h.Sessions().Get("s1"); open {
		t.Error("a's stale copy of s1 is still open")
	}
}

// TestLeavingWithTheServerAwayIsQuick: a host leaving while NATS is down
// does not spend its caller's shutdown budget waiting for the server; its
// presence entry expires by itself.
func TestLeavingWithTheServerAwayIsQuick(t *testing.T) {
	srv := startServer(t, 0)
	a := startNode(t, srv, streamName(), "a", nodeOpts{})
	c := a.c
	a.c = nil
	srv.Shutdown()
	eventually(t, "the host to see the server gone", func() bool { return !c.Connected() })
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	c.Close(ctx)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("leaving with the server away took %s", d)
	}
}

// TestAHostWhoseLeaseIsTakenStopsItsTurnAtOnce: host a runs a long turn
// when its lease is removed under it (as when it stalls past lease_ttl)
// and b takes the session. a learns it from its watch of the lease bucket
// and closes its copy at once — its turn stops — instead of answering the
// whole turn into a log it can no longer write; b's log closes a's turn
// as interrupted.
func TestAHostWhoseLeaseIsTakenStopsItsTurnAtOnce(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{delay: 50 * time.Millisecond})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	kv := leases(t, srv, stream)
	ss := a.open(t, "s1")
	if _, err := ss.Prompt(ctxT(t), sessions.PromptRequest{Content: strings.Repeat("long ", 200)}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the answer streams: 10 s of it
	if err := kv.Delete(ctxT(t), "s1"); err != nil {
		t.Fatal(err)
	}
	// The delete stands for an expiry, which comes only after a's own
	// renewals stopped; b forwards by its watch's view, which must have
	// seen it, or b would forward to a copy a's lease still vouches for.
	eventually(t, "b to see the lease gone", func() bool {
		_, ok := b.c.SeesLease("s1")
		return !ok
	})
	taken := time.Now()
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "via b"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a to close its copy of s1", func() bool {
		_, open := a.h.Sessions().Get("s1")
		return !open
	})
	if d := time.Since(taken); d > leaseTTL/3 {
		t.Errorf("a closed its copy %v after b took the session; its own renewal would have told it by %v", d, leaseTTL/3)
	}
	ends := map[int]string{}
	for _, e := range b.events(t, "s1") {
		if e.Type == session.TurnEnd {
			ends[e.Turn] = e.Reason
		}
	}
	if ends[1] != "interrupted" {
		t.Fatalf("turn 1 of s1 ended %q on b", ends[1])
	}
}
