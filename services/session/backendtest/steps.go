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

// stepsStoredAsTheyEnd runs a real agent through a turn of two tool steps
// and holds it inside the second step's call: another process reading the
// store meanwhile finds the first step whole and the running call named,
// so a crash there loses no completed step. Then the live stream's rule:
// the session's durable seq is what the store holds.
func stepsStoredAsTheyEnd(t *testing.T, f Fixture) {
	a := f.mount(t,
		scripted.Reply{Text: "first", ToolCalls: []scripted.Call{{Name: "wait", Arguments: `{"n":1}`}}},
		scripted.Reply{Text: "second", ToolCalls: []scripted.Call{{Name: "wait", Arguments: `{"n":2}`}}},
		scripted.Reply{Text: "done"})
	ts, err := tools.Key.Get(a.root)
	if err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	if err := ts.Register(a.root, tools.Tool{
		Name: "wait", Description: "holds the second step", Parameters: json.RawMessage(`{"type":"object"}`),
		Execute: func(ctx stdctx.Context, c tools.Call) (tools.Result, error) {
			var args struct{ N int }
			json.Unmarshal(c.Arguments, &args)
			if args.N == 2 {
				close(entered)
				select {
				case <-release:
				case <-ctx.Done():
				}
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
		t.Fatal("the second step's call never started")
	}

	stored := f.mount(t).load(t, "s1")
	var types []session.Type
	for _, e := range stored {
		types = append(types, e.Type)
	}
	want := []session.Type{session.TurnStart, session.UserMessage,
		session.StepStart, session.AssistantMessage, session.ToolCall, session.DecisionRecorded, session.ToolResult, session.StepEnd,
		session.StepStart, session.AssistantMessage, session.ToolCall}
	if len(types) != len(want) {
		t.Fatalf("inside the second step's call the store holds %v; want %v", types, want)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("inside the second step's call the store holds %v; want %v", types, want)
		}
	}
	if d := h.Agent.Session().Durable(); d != int64(len(stored)) {
		t.Fatalf("Durable() = %d while the store holds %d events", d, len(stored))
	}
	close(release)
	h.Agent.WhenIdle(bg)
}
