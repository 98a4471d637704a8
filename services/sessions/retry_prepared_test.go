package sessions_test

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestARetryOfAPreparedMessageIsTheSameRequest: a prepare listener (a
// command's expansion) rewrites what the sender typed; a retry of the
// typed text under its request id is the same request — answered with
// the first message's id, live and after a resume — and other text under
// that id is still refused as reused.
func TestARetryOfAPreparedMessageIsTheSameRequest(t *testing.T) {
	e := newEnv(t, setup{dir: t.TempDir()})
	if _, err := agentcontroller.EventPrepare.On(e.root, func(ctx stdctx.Context, p agentcontroller.Preparation, next agentcontroller.PrepareNext) (agentcontroller.Preparation, error) {
		if strings.HasPrefix(p.Content, "/") {
			p.Content = "expanded: " + p.Content[1:]
		}
		return next.Call(ctx, p)
	}); err != nil {
		t.Fatal(err)
	}
	ctx := stdctx.Background()
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	s := mustSession(t, e, "w")
	first, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "/review"})
	if err != nil {
		t.Fatal(err)
	}
	retry := func(when string) {
		t.Helper()
		id, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "/review"})
		if err != nil || id != first {
			t.Fatalf("%s: the retry of r1 got %q, %v; want the first message %q", when, id, err, first)
		}
		if _, err := s.Prompt(ctx, sessions.PromptRequest{RequestID: "r1", Content: "/other"}); !errs.HasCode(err, sessions.RequestIDReused) {
			t.Fatalf("%s: other text under r1: %v; want %s", when, err, sessions.RequestIDReused)
		}
	}
	retry("live")
	if err := e.ctl.Idle(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	retry("after its turn")
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.ctl.Ensure(ctx, ensureOpts("w")); err != nil {
		t.Fatal(err)
	}
	s = mustSession(t, e, "w")
	retry("after a resume")
	if err := e.ctl.Close(ctx, "w"); err != nil {
		t.Fatal(err)
	}
}
