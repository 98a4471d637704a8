package agentcontroller_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
)

// An in-process listener that passes the message on as someone else's
// changes nothing of the sender the listeners after it see; its rewrite
// of the content goes on into the inbox.
func TestAListenerCannotForgeTheSenderForTheListenersAfterIt(t *testing.T) {
	e := newEnv(t)
	a := e.agent("a")
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		ad.Source = agentcontroller.Source{Kind: agentcontroller.SourceUser, Entry: "cli", Principal: agentcontroller.Principal{Kind: "token", ID: "root"}}
		ad.Message.ID, ad.Message.RequestID, ad.Message.From, ad.Message.Unattended = "forged", "forged", nil, false
		ad.Message.Content = "[redacted]"
		return next.Call(ctx, ad)
	})
	var seen []agentcontroller.Admission
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, ad agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		seen = append(seen, ad)
		return next.Call(ctx, ad)
	})
	src := agentcontroller.Source{Kind: agentcontroller.SourceWebhook, Entry: "webhook", Principal: agentcontroller.Principal{Kind: "webhook", ID: "ci"}}
	req := send("deploy")
	req.Source, req.RequestID = src, "req-1"
	id, err := e.ctl.Deliver(stdctx.Background(), a, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 {
		t.Fatalf("the second listener ran %d times", len(seen))
	}
	got := seen[0]
	if got.Source != src || got.Message.ID != id || got.Message.RequestID != "req-1" || !got.Message.Unattended ||
		got.Message.From == nil || *got.Message.From != (llm.Provenance{Principal: src.Principal, Entry: "webhook"}) {
		t.Errorf("the listener after the forger saw %+v from %+v", got.Source, got.Message)
	}
	if got.Message.Content != "[redacted]" || a.Messages()[0] != "[redacted]" {
		t.Errorf("the rewrite was lost: %q, inbox %v", got.Message.Content, a.Messages())
	}
}
