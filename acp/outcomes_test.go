package acp_test

import (
	stdctx "context"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
)

// A prompt of an ACP client queued behind a turn that another client
// cancels answers cancelled, with its drop recorded in the log, instead
// of waiting for ever for a turn that will not come.
func TestAPromptDroppedByAnotherClientsCancelAnswers(t *testing.T) {
	e := newEnv(t, envOpts{mode: "full-access", replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "done"}}})
	id := e.newSession()
	first := make(chan error, 1)
	go func() { _, err := e.prompt(id, "run the gate"); first <- err }()
	select {
	case <-gate.started:
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	second := make(chan acp.PromptResponse, 1)
	go func() {
		r, err := e.prompt(id, "queued behind it")
		if err != nil {
			t.Error(err)
		}
		second <- r
	}()
	ss, ok := e.h.Sessions().Get(string(id))
	if !ok {
		t.Fatal("the session is not open")
	}
	waitFor := func(what string, ok func() bool) {
		deadline := time.Now().Add(wait)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitFor("the second prompt queued", func() bool { return pending(t, e.h.Sessions(), ss.ID()) == 1 })
	// Another client (the web page, a peer) cancels.
	if err := ss.Cancel(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-second:
		if r.StopReason != acp.StopReasonCancelled {
			t.Fatalf("the dropped prompt answered %q", r.StopReason)
		}
	case <-time.After(wait):
		t.Fatal("the dropped prompt never answered")
	}
	<-first
	var drops int
	for _, ev := range history(t, e.h.Sessions(), ss.ID()) {
		if ev.Type == session.MessageDropped && ev.Message.Content == "queued behind it" {
			drops++
		}
	}
	if drops != 1 {
		t.Fatalf("%d drops of the queued prompt in the log", drops)
	}
}
