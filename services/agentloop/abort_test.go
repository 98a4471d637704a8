package agentloop_test

import (
	stdctx "context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
)

// countRequests counts the model calls of the loop.
func countRequests(e *env) *atomic.Int32 {
	var n atomic.Int32
	agentloop.EventRequest.On(e.root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		n.Add(1)
		return next.Call(ctx, ev)
	})
	return &n
}

// TestAbortHoldsWhenAToolIgnoresIt: a tool that finishes its work after
// Abort does not let the turn go on. Its result is kept, the model's other
// call does not run (and is answered), the model is not asked again, and
// the turn ends aborted.
func TestAbortHoldsWhenAToolIgnoresIt(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "stubborn"}, {Name: "stubborn"}}},
		{Text: "never asked"},
	}, agentloop.Config{})
	calls := countRequests(e)
	entered, release := make(chan struct{}, 2), make(chan struct{})
	var ran atomic.Int32
	e.tool("stubborn", func(stdctx.Context, tools.Call) (tools.Result, error) {
		ran.Add(1)
		entered <- struct{}{}
		<-release // ignores its context
		return tools.Result{Content: "done anyway"}, nil
	})
	a := e.create("a").Agent
	a.Followup(user("go"))
	<-entered
	a.Abort()
	close(release)
	idle(t, a)
	assertTrace(t, a.Session(),
		"turn/start", "user/message:go",
		"step/start", "assistant/message", "tool/call:stubborn", "tool/result", "tool/result", "turn/end:aborted")
	if n := calls.Load(); n != 1 {
		t.Fatalf("the model was called %d times; after the abort it must not be called again", n)
	}
	if n := ran.Load(); n != 1 {
		t.Fatalf("the tool ran %d times; the call after the abort must not run", n)
	}
	h := a.Session().History()
	if m := h.At(3); m.Role != llm.RoleTool || !m.IsError || m.ToolCallID != "call_2" {
		t.Fatalf("the unrun call is not answered as an error: %+v", m)
	}
}

// lateProvider ignores its context: its first call answers with a tool
// call once released, whatever happened meanwhile; later calls say "again".
type lateProvider struct {
	entered, release chan struct{}
	mu               sync.Mutex
	calls            int
}

func (p *lateProvider) Stream(stdctx.Context, llm.Request) (llm.Stream, error) {
	p.mu.Lock()
	p.calls++
	first := p.calls == 1
	p.mu.Unlock()
	if !first {
		return &sliceStream{chunks: []llm.Chunk{{Kind: llm.ChunkText, Text: "again"}, {Kind: llm.ChunkFinish, Finish: llm.FinishStop}}}, nil
	}
	p.entered <- struct{}{}
	<-p.release
	return &sliceStream{chunks: []llm.Chunk{
		{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 0, ID: "c1", Name: "clock"}},
		{Kind: llm.ChunkFinish, Finish: llm.FinishToolCalls},
	}}, nil
}

// TestAbortHoldsWhenTheProviderCompletesAnyway: a provider that answers
// after Abort gets no tool run and no second call; the turn ends aborted.
func TestAbortHoldsWhenTheProviderCompletesAnyway(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	p := &lateProvider{entered: make(chan struct{}, 4), release: make(chan struct{})}
	e.registerProvider("late", p)
	var ran atomic.Bool
	e.tool("clock", func(stdctx.Context, tools.Call) (tools.Result, error) {
		ran.Store(true)
		return tools.Result{Content: "noon"}, nil
	})
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "late"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(stdctx.Background())
	a := h.Agent
	a.Followup(user("go"))
	<-p.entered
	a.Abort()
	close(p.release)
	idle(t, a)
	if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"aborted"}) {
		t.Fatalf("turn ends %v, want [aborted]", ends)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calls != 1 || ran.Load() {
		t.Fatalf("after the abort: %d model calls (want 1), tool ran: %v", p.calls, ran.Load())
	}
	// The history the next turn sends is valid: no call without its answer.
	hist := a.Session().History()
	for i := range hist.Len() {
		if m := hist.At(i); len(m.ToolCalls) > 0 {
			t.Fatalf("an aborted stream left a tool call in the history: %+v", m)
		}
	}
}

// TestAbortDoesNotReachTheNextTurn: an abort governs the turn it hit; the
// next queued message runs to completion.
func TestAbortDoesNotReachTheNextTurn(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "wait"}}}, {Text: "after"}}, agentloop.Config{})
	g := newGate()
	e.tool("wait", g.run)
	a := e.create("a").Agent
	a.Followup(user("first"))
	g.wait(t)
	a.Abort()
	idle(t, a)
	a.Followup(user("second"))
	idle(t, a)
	if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"aborted", "completed"}) {
		t.Fatalf("turn ends %v", ends)
	}
}

// TestAbortBeforeTheFirstStepEndsTheTurn: an abort while the turn records
// its prompt (here: during the first checkpoint) ends the turn aborted
// before the model is called.
func TestAbortBeforeTheFirstStepEndsTheTurn(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	calls := countRequests(e)
	var once sync.Once
	session.EventFlush.On(e.root, func(ctx stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		once.Do(func() {
			a, _ := e.registry.Get(f.Session.AgentID())
			a.Abort()
		})
		return next.Call(ctx, f)
	})
	a := e.create("a").Agent
	a.Followup(user("go"))
	idle(t, a)
	assertTrace(t, a.Session(), "turn/start", "user/message:go", "turn/end:aborted")
	if n := calls.Load(); n != 0 {
		t.Fatalf("the model was called %d times after the abort", n)
	}
	a.Followup(user("next"))
	idle(t, a)
	if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"aborted", "completed"}) {
		t.Fatalf("turn ends %v", ends)
	}
}
