package agentcontroller_test

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

func from(req agentcontroller.Request, kind, id string) agentcontroller.Request {
	req.Source.Principal = agentcontroller.Principal{Kind: kind, ID: id}
	return req
}

// A retry is its sender's input again, not what the prepare stage or an
// admission listener made of it: a command expanded on the first attempt
// must not turn its own retry into a "reused" request id.
func TestARetryOfARewrittenMessageIsAnsweredNotRefused(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	agentcontroller.EventPrepare.On(e.root, func(ctx stdctx.Context, p agentcontroller.Preparation, next agentcontroller.PrepareNext) (agentcontroller.Preparation, error) {
		if strings.HasPrefix(p.Content, "/") {
			p.Content = "expanded " + strings.TrimPrefix(p.Content, "/")
		}
		return next.Call(ctx, p)
	})
	req := from(withID("/review", "r1"), "token", "alice")
	id, err := e.ctl.Deliver(stdctx.Background(), a, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.ctl.Deliver(stdctx.Background(), a, req)
	if err != nil || again != id {
		t.Fatalf("the retry of an expanded command got %q, %v; want %q", again, err, id)
	}
	// Other input under the same id is still refused, though it expands
	// to something else than the first.
	_, err = e.ctl.Deliver(stdctx.Background(), a, from(withID("/deploy", "r1"), "token", "alice"))
	if !errs.HasCode(err, agentcontroller.RequestIDReused) {
		t.Fatalf("other input under a spent request id: %v", err)
	}
	// And the first input's expansion sent as text is other input too.
	_, err = e.ctl.Deliver(stdctx.Background(), a, from(withID("expanded review", "r1"), "token", "alice"))
	if !errs.HasCode(err, agentcontroller.RequestIDReused) {
		t.Fatalf("the expansion sent as text under a spent request id: %v", err)
	}
	if len(a.Messages()) != 1 {
		t.Fatalf("inbox %v", a.Messages())
	}
}

// A message withdrawn while it waited behind another is recorded dropped;
// its sender's retry learns that, not that someone else took its id.
func TestARetryOfAMessageWithdrawnInTheQueueLearnsItWasDropped(t *testing.T) {
	e := newEnv(t)
	g := newHoldGate()
	g.install(t, e)
	a := e.agent("a")
	held := e.deliverAsync(stdctx.Background(), a, send("hold"))
	g.waitHolding(t)
	req := from(withID("behind", "r-behind"), "jwt", "bob")
	behind := e.deliverAsync(stdctx.Background(), a, req)
	waitQueue(t, e, "a", 2)
	if n := e.ctl.Withdraw(a, errs.New("TEST_CANCELLED", "cancelled")); n != 2 {
		t.Fatalf("withdrew %d", n)
	}
	close(g.release)
	wait(t, held)
	if r := wait(t, behind); !errs.HasCode(r.err, agentcontroller.MessageDropped) {
		t.Fatalf("the withdrawn sender got %v", r.err)
	}
	if r := wait(t, e.deliverAsync(stdctx.Background(), a, req)); !errs.HasCode(r.err, agentcontroller.MessageDropped) {
		t.Fatalf("the retry of a dropped message got %v; want %s", r.err, agentcontroller.MessageDropped)
	}
}
