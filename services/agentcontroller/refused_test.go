package agentcontroller_test

import (
	stdctx "context"
	"errors"
	"testing"

	"github.com/dsh-go/dsh/services/agentcontroller"
)

// withID is send with a request id.
func withID(text, requestID string) agentcontroller.Request {
	r := send(text)
	r.RequestID = requestID
	return r
}

// A message that waited for a reload's hold past its limit expired: the
// refusal says so, and a retry of its request id after the reload is
// answered with that expiry rather than admitted.
func TestAHoldThatRunsOutExpiresTheMessageForGood(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	limit, cancel := stdctx.WithCancel(stdctx.Background())
	release, err := e.ctl.Hold(limit)
	if err != nil {
		t.Fatal(err)
	}
	ch := e.deliverAsync(stdctx.Background(), a, withID("waits", "r1"))
	waitFor(t, "the delivery waiting for the hold", holdWaiting(e, 1))
	cancel()
	r := wait(t, ch)
	ref, ok := agentcontroller.RefusalOf(r.err)
	if !ok || !ref.Expired || ref.Reason != agentcontroller.ReasonHeld || agentcontroller.OutcomeOf(r.err) != agentcontroller.OutcomeExpired {
		t.Fatalf("the held delivery ended with %v", r.err)
	}
	release()
	_, err = e.ctl.Deliver(stdctx.Background(), a, withID("waits", "r1"))
	if ref, ok := agentcontroller.RefusalOf(err); !ok || !ref.Expired || ref.Reason != agentcontroller.ReasonHeld {
		t.Fatalf("the retry answered %v", err)
	}
	if len(a.Messages()) != 0 {
		t.Fatalf("the retry of an expired message was admitted: %v", a.Messages())
	}
	// A new request id is decided anew.
	if _, err := e.ctl.Deliver(stdctx.Background(), a, withID("waits", "r2")); err != nil {
		t.Fatal(err)
	}
}

// A refusal is recorded per request id; what is not the message's fate —
// no request id to ask with, a failing check — leaves no record, and the
// next attempt is decided.
func TestOnlyAMessagesOwnRefusalIsRecorded(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	refuse, fail := true, true
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		switch ad.Message.Content {
		case "refuse":
			if refuse {
				return agentcontroller.Reject("test/no", "not now", false), nil
			}
		case "fail":
			if fail {
				return agentcontroller.Decision{}, errors.New("the check broke")
			}
		}
		return next.Call(ctx, ad)
	})
	if _, err := e.ctl.Deliver(stdctx.Background(), a, withID("refuse", "r1")); agentcontroller.OutcomeOf(err) != agentcontroller.OutcomeRefused {
		t.Fatalf("refusal: %v", err)
	}
	if _, err := e.ctl.Deliver(stdctx.Background(), a, send("refuse")); !agentcontroller.IsRejected(err) {
		t.Fatalf("refusal without a request id: %v", err)
	}
	if _, err := e.ctl.Deliver(stdctx.Background(), a, withID("fail", "r2")); agentcontroller.OutcomeOf(err) != "" {
		t.Fatalf("a failing check named outcome %q: %v", agentcontroller.OutcomeOf(err), err)
	}
	refuse, fail = false, false
	_, err := e.ctl.Deliver(stdctx.Background(), a, withID("refuse", "r1"))
	if ref, ok := agentcontroller.RefusalOf(err); !ok || ref.Reason != "test/no" || agentcontroller.OutcomeOf(err) != agentcontroller.OutcomeRefused {
		t.Fatalf("the retry of a refused request answered %v", err)
	}
	for _, req := range []agentcontroller.Request{send("refuse"), withID("fail", "r2")} {
		if _, err := e.ctl.Deliver(stdctx.Background(), a, req); err != nil {
			t.Fatalf("%q (request %q) was not decided anew: %v", req.Content, req.RequestID, err)
		}
	}
	waitFor(t, "two messages in the inbox", func() bool { return len(a.Messages()) == 2 })
}
