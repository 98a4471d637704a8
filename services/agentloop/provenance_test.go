package agentloop_test

import (
	stdctx "context"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
)

// TestCallsCarryTheTurnsProvenance: a call carries who is behind its
// turn's inputs; a steering message from someone else joins them (each
// provenance once, the turn's first input first), and the next turn
// starts afresh.
func TestCallsCarryTheTurnsProvenance(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "wait"}}},
		{ToolCalls: []scripted.Call{{Name: "look"}}},
		{Text: "done"},
		{ToolCalls: []scripted.Call{{Name: "look"}}},
		{Text: "done again"},
	}, agentloop.Config{})
	g := newGate()
	e.tool("wait", g.run)
	var mu sync.Mutex
	var seen [][]llm.Provenance
	e.tool("look", func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		mu.Lock()
		seen = append(seen, c.Sources)
		mu.Unlock()
		return tools.Result{Content: "seen"}, nil
	})
	alice := &llm.Provenance{Principal: llm.Principal{Kind: "token", ID: "alice"}, Entry: "serve"}
	hook := &llm.Provenance{Principal: llm.Principal{Kind: "webhook", ID: "ci"}, Entry: "webhook"}
	from := func(text string, p *llm.Provenance) llm.Message {
		m := user(text)
		m.From = p
		return m
	}
	a := e.create("a").Agent
	a.Followup(from("go", alice))
	g.wait(t)
	a.Steer(from("also this", hook))
	a.Steer(from("and this", alice))
	g.open()
	idle(t, a)
	a.Followup(from("again", alice))
	idle(t, a)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || len(seen[0]) != 2 || seen[0][0] != *alice || seen[0][1] != *hook || len(seen[1]) != 1 || seen[1][0] != *alice {
		t.Fatalf("the calls carried %+v", seen)
	}
}
