package sessions_test

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestAWithdrawnMessageKeepsItsSender: a message a cancel withdraws while
// it waits behind another in admission is recorded as dropped; its retry
// by the same caller (a principal, as every API caller has) learns it was
// dropped, rather than being told its request id belongs to someone else.
func TestAWithdrawnMessageKeepsItsSender(t *testing.T) {
	e := newEnv(t, setup{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "after"}}})
	g := e.gateTool("block")
	holding := make(chan struct{}, 2)
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if strings.HasPrefix(a.Message.Content, "hold") {
			holding <- struct{}{}
			<-ctx.Done()
			return agentcontroller.Decision{}, ctx.Err()
		}
		return next.Call(ctx, a)
	})
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: "r1", Content: "block"}); err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	alice := sessions.Source{Kind: sessions.SourceUser, Entry: "api", Principal: llm.Principal{Kind: "token", ID: "alice"}}
	results := make(chan error, 2)
	send := func(rid, content string) {
		go func() {
			_, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: rid, Content: content, Source: alice})
			results <- err
		}()
	}
	send("r2", "hold me")
	wait(t, holding)
	send("r3", "behind the held one")
	waitInAdmission(t, e, 2)
	if err := e.ctl.Cancel(sessions.WithActor(ctx, "the test"), "w"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := wait(t, results); !errs.HasCode(err, sessions.MessageDropped) {
			t.Fatalf("a withdrawn sender got %v, want %s", err, sessions.MessageDropped)
		}
	}
	for rid, content := range map[string]string{"r2": "hold me", "r3": "behind the held one"} {
		_, err := e.ctl.Prompt(ctx, "w", sessions.PromptRequest{RequestID: rid, Content: content, Source: alice})
		if !errs.HasCode(err, sessions.MessageDropped) {
			t.Fatalf("%s retried by its sender: %v, want %s", rid, err, sessions.MessageDropped)
		}
	}
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}
