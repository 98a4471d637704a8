package backendtest

import (
	stdctx "context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// recordWaiter is the part of the loop's agent that says when a handed
// outcome is durable.
type recordWaiter interface {
	WaitRecorded(ctx stdctx.Context, requestID string) error
}

// outcomesMidTurnAreStored: a refusal handed over while a turn runs — its
// decision record first, as the agent controller hands them — is stored,
// after its record, in the middle of the turn, before the turn ends; a
// log that stops there (a crash) restores with the turn interrupted, its
// open call answered, and the refusal found by its request id.
func outcomesMidTurnAreStored(t *testing.T, f Fixture) {
	a := f.mount(t,
		scripted.Reply{Text: "first", ToolCalls: []scripted.Call{{Name: "wait", Arguments: `{}`}}},
		scripted.Reply{Text: "done"})
	ts, err := tools.Key.Get(a.root)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	if err := ts.Register(a.root, tools.Tool{
		Name: "wait", Description: "holds the turn", Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
			close(entered)
			select {
			case <-release:
			case <-ctx.Done():
			}
			return tools.Result{Content: "ok"}, nil
		},
	}); err != nil {
		t.Fatal(err)
	}
	h, err := a.registry.Create(bg, agents.CreateOptions{AgentID: "main", SessionID: "s1", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(bg)
	h.Agent.Followup(llm.Message{Role: llm.RoleUser, Content: "go"})
	select {
	case <-entered:
	case <-time.After(30 * time.Second):
		t.Fatal("the call never started")
	}
	rec, ok := h.Agent.(recorder)
	w, ok2 := h.Agent.(recordWaiter)
	if !ok || !ok2 {
		t.Fatal("the loop's agent takes no handed-over records")
	}
	session.EventDecision.Emit(bg, h.Agent.Context(), session.Decided{AgentID: "main", WithOutcome: true, Decision: session.Decision{
		Stage: session.StageAdmission, Verdict: "refuse", Reason: "test/no", RequestID: "r1", MessageID: "m-r1"}})
	if err := rec.RecordEvent(session.Event{Type: session.MessageRefused, RequestID: "r1", Reason: "test/no", Error: "not now",
		Message: &llm.Message{ID: "m-r1", Role: llm.RoleUser, Content: "no"}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(bg, 30*time.Second)
	defer cancel()
	if err := w.WaitRecorded(ctx, "r1"); err != nil {
		t.Fatal(err)
	}

	stored := f.mount(t).load(t, "s1")
	var types []session.Type
	for _, e := range stored {
		types = append(types, e.Type)
	}
	want := []session.Type{session.TurnStart, session.UserMessage,
		session.StepStart, session.AssistantMessage, session.ToolCall, session.DecisionRecorded, session.MessageRefused}
	if len(types) != len(want) {
		t.Fatalf("with the call held the store holds %v; want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("with the call held the store holds %v; want %v", types, want)
		}
	}
	refused := stored[len(stored)-1]
	if refused.Turn != 1 || refused.Step != 0 || refused.RequestID != "r1" || stored[len(stored)-2].Decision.RequestID != "r1" {
		t.Fatalf("the stored refusal %+v after %+v", refused, stored[len(stored)-2])
	}

	// Restored as a crash there leaves it.
	b := f.mount(t)
	scope, err := b.root.Scoped("copy")
	if err != nil {
		t.Fatal(err)
	}
	r, err := b.store.Restore(scope, "copy", "s1-copy", stored)
	if err != nil {
		t.Fatal(err)
	}
	defer b.store.Close(r)
	if in, ok := r.Interrupted(); !ok || in.Turn != 1 || in.Unanswered != 1 || in.Prompt.Content != "go" {
		t.Fatalf("Interrupted() = %+v, %v", in, ok)
	}
	if ev, ok := r.Outcome("r1"); !ok || ev.Type != session.MessageRefused || ev.Seq != refused.Seq {
		t.Fatalf("the restored refusal: %+v %v", ev, ok)
	}
	if h := r.History(); h.Len() != 3 {
		t.Fatalf("the restored history has %d messages; want the prompt, the call and its interrupted result", h.Len())
	}
	close(release)
	h.Agent.WhenIdle(bg)
}
