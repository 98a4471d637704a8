package sessions_test

import (
	stdctx "context"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

func TestPromptRunsATurnAndARetryDeliversOnce(t *testing.T) {
	e := newEnv(t, setup{})
	s := e.open(sessions.OpenOptions{})
	id, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1", Content: "hello"})
	if err != nil || id == "" {
		t.Fatalf("prompt: %q %v", id, err)
	}
	// A retry while the first may still be in the inbox, and one after
	// the session recorded it, both answer with the original id.
	again, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1", Content: "hello"})
	if err != nil || again != id {
		t.Fatalf("retry: %q %v, want %q", again, err, id)
	}
	e.idle(s)
	again, err = s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1", Content: "hello"})
	if err != nil || again != id {
		t.Fatalf("retry after the turn: %q %v, want %q", again, err, id)
	}
	e.idle(s)
	if n := userMessages(e.events(s)); n != 1 {
		t.Fatalf("the prompt was recorded %d times, want once", n)
	}
	if err := s.Detach(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestARefusalIsASessionErrorAndAKeptOutcome(t *testing.T) {
	e := newEnv(t, setup{})
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Message.Content == "no" {
			return agentcontroller.Reject("test/no", "not this one", true), nil
		}
		return next.Call(ctx, a)
	})
	s := e.open(sessions.OpenOptions{})
	var mu sync.Mutex
	var heard []sessions.Outcome
	sessions.EventOutcome.On(e.agent(s).Context(), func(_ stdctx.Context, o sessions.Outcome) error {
		mu.Lock()
		heard = append(heard, o)
		mu.Unlock()
		return nil
	})
	_, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r9", Content: "no"})
	if !errs.Has(err, sessions.PromptRejected, "test/no") {
		t.Fatalf("want %s (test/no), got %v", sessions.PromptRejected, err)
	}
	r, ok := sessions.RejectionOf(err)
	if !ok || r.Message != "not this one" || !r.Presented || r.RequestID != "r9" {
		t.Fatalf("rejection: %+v %v", r, ok)
	}
	out := s.Outcomes()
	if len(out) != 1 || out[0].Kind != sessions.OutcomePromptRejected || out[0].RequestID != "r9" ||
		out[0].Code != sessions.PromptRejected || out[0].Reason != "test/no" || !out[0].Presented {
		t.Fatalf("outcomes: %+v", out)
	}
	mu.Lock()
	if len(heard) != 1 || heard[0].RequestID != "r9" {
		t.Fatalf("emitted outcomes: %+v", heard)
	}
	mu.Unlock()
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{Content: "yes"}); err != nil {
		t.Fatalf("a refusal refuses that prompt, not the session: %v", err)
	}
	s.Detach(stdctx.Background())
}

func TestOutcomesKeepTheLastSixteen(t *testing.T) {
	e := newEnv(t, setup{})
	agentcontroller.EventAdmission.On(e.root, func(stdctx.Context, agentcontroller.Admission, agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		return agentcontroller.Reject("test/no", "no", false), nil
	})
	s := e.open(sessions.OpenOptions{})
	for i := range 20 {
		s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: string(rune('a' + i)), Content: "x"})
	}
	out := s.Outcomes()
	if len(out) != 16 || out[0].RequestID != "e" || out[15].RequestID != "t" {
		t.Fatalf("kept %d, first %q, last %q", len(out), out[0].RequestID, out[len(out)-1].RequestID)
	}
	s.Detach(stdctx.Background())
}

func TestCancelEndsTheTurn(t *testing.T) {
	e := newEnv(t, setup{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "block"}}}, {Text: "done"}}})
	g := e.gateTool("block")
	s := e.open(sessions.OpenOptions{})
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{Content: "go"}); err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	if err := s.Cancel(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	evs := e.events(s)
	if last := evs[len(evs)-1]; last.Type != session.TurnEnd {
		t.Fatalf("after cancel the last event is %s", last.Type)
	}
	s.Detach(stdctx.Background())
	if err := s.Cancel(stdctx.Background()); !errs.HasCode(err, sessions.Closed) {
		t.Fatalf("cancel of a closed session: %v", err)
	}
}
