package agentloop_test

import (
	stdctx "context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTurnWithToolCallRecordsEventsInOrder(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{Text: "let me check", ToolCalls: []scripted.Call{{Name: "clock", Arguments: `{"tz":"UTC"}`}}},
		{Text: "it is noon"},
	}, agentloop.Config{})
	var gotArgs string
	e.tool("clock", func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		gotArgs = string(c.Arguments)
		return tools.Result{Content: "12:00"}, nil
	})
	a := e.create("a").Agent
	if err := a.Followup(user("time?")); err != nil {
		t.Fatal(err)
	}
	idle(t, a)
	assertTrace(t, a.Session(),
		"turn/start", "user/message:time?",
		"step/start", "assistant/message", "tool/call:clock", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end",
		"turn/end:completed")
	if gotArgs != `{"tz":"UTC"}` {
		t.Fatalf("tool got arguments %q", gotArgs)
	}
	h := a.Session().History()
	var roles []string
	for _, m := range h.All() {
		roles = append(roles, string(m.Role)+":"+m.Content)
	}
	want := []string{"user:time?", "assistant:let me check", "tool:12:00", "assistant:it is noon"}
	if !slices.Equal(roles, want) {
		t.Fatalf("history %v", roles)
	}
	if a.Status() != agents.StatusIdle {
		t.Fatalf("status %s", a.Status())
	}
}

// TestMessagesQueuedBeforeATurnStartsShareIt: what is queued while a turn
// runs goes, all of it and in order, into the next turn, each message its
// own user/message event; a message queued once that turn has started
// waits for the one after.
func TestMessagesQueuedBeforeATurnStartsShareIt(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{}) // echo replies
	a := e.create("a").Agent
	hold := map[int]chan struct{}{1: make(chan struct{}), 2: make(chan struct{})}
	entered := make(chan int, 2)
	agentloop.EventRequest.On(e.root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		if ch, ok := hold[ev.Turn]; ok {
			entered <- ev.Turn
			<-ch
		}
		return next.Call(ctx, ev)
	})
	follow := func(text string) {
		if err := a.Followup(user(text)); err != nil {
			t.Fatal(err)
		}
	}
	follow("one")
	<-entered // turn 1 is running
	follow("two")
	follow("three")
	close(hold[1])
	<-entered // turn 2 is running, with what was queued
	follow("four")
	close(hold[2])
	idle(t, a)
	assertTrace(t, a.Session(),
		"turn/start", "user/message:one", "step/start", "assistant/message", "step/end", "turn/end:completed",
		"turn/start", "user/message:two", "user/message:three", "step/start", "assistant/message", "step/end", "turn/end:completed",
		"turn/start", "user/message:four", "step/start", "assistant/message", "step/end", "turn/end:completed")
	// The model saw both messages of turn 2 in one request.
	h := a.Session().History()
	if got := h.At(2).Content + "|" + h.At(3).Content + "|" + h.At(4).Content; got != "two|three|You said: three" {
		t.Fatalf("history after turn 2: %v", h.Messages())
	}
}

// recordingProvider answers "ok" and keeps every request.
type recordingProvider struct {
	mu   sync.Mutex
	reqs []llm.Request
}

func (p *recordingProvider) Stream(ctx stdctx.Context, req llm.Request) (llm.Stream, error) {
	p.mu.Lock()
	p.reqs = append(p.reqs, req)
	p.mu.Unlock()
	return &sliceStream{chunks: []llm.Chunk{{Kind: llm.ChunkText, Text: "ok"}, {Kind: llm.ChunkFinish, Finish: llm.FinishStop}}}, nil
}

type sliceStream struct{ chunks []llm.Chunk }

func (s *sliceStream) Recv() (llm.Chunk, error) {
	if len(s.chunks) == 0 {
		return llm.Chunk{}, errors.New("io.EOF stand-in")
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return c, nil
}
func (s *sliceStream) Close() error { return nil }

func TestRequestListenerReplacesButCannotMutate(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	rec := &recordingProvider{}
	e.registerProvider("rec", rec)
	var seenByFirst llm.Request
	agentloop.EventRequest.On(e.root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		seenByFirst = ev.Request
		return next.Call(ctx, ev)
	})
	agentloop.EventRequest.On(e.root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		// Try to mutate what we were handed, then replace.
		m := ev.Request.History.At(0)
		m.Content = "tampered"
		ev.Request.System = "replaced system"
		return next.Call(ctx, ev)
	})
	h, _ := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "rec", SystemPrompt: "be brief"}})
	defer h.Dispose(stdctx.Background())
	h.Agent.Followup(user("hello"))
	idle(t, h.Agent)
	if len(rec.reqs) != 1 || rec.reqs[0].System != "replaced system" {
		t.Fatalf("the replaced request did not reach the model: %+v", rec.reqs)
	}
	if seenByFirst.System != "be brief" {
		t.Fatalf("first listener saw %q", seenByFirst.System)
	}
	if got := rec.reqs[0].History.At(0).Content; got != "hello" {
		t.Fatalf("history was mutated through a listener's copy: %q", got)
	}
	if got := h.Agent.Session().History().At(0).Content; got != "hello" {
		t.Fatalf("session history was mutated: %q", got)
	}
}

func TestSteeringJoinsTheRunningTurn(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "wait"}}},
		{Text: "done"},
	}, agentloop.Config{})
	g := newGate()
	e.tool("wait", g.run)
	a := e.create("a").Agent
	a.Followup(user("go"))
	g.wait(t)
	if err := a.Steer(user("faster")); err != nil {
		t.Fatal(err)
	}
	g.open()
	idle(t, a)
	assertTrace(t, a.Session(),
		"turn/start", "user/message:go",
		"step/start", "assistant/message", "tool/call:wait", "tool/result", "steering/message:faster", "step/end",
		"step/start", "assistant/message", "step/end",
		"turn/end:completed")
}

func TestSteeringWhileIdleStartsATurn(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	a := e.create("a").Agent
	a.Steer(user("psst"))
	idle(t, a)
	if ends := turnEnds(a.Session()); len(ends) != 1 || ends[0] != agentloop.ReasonCompleted {
		t.Fatalf("turns %v", ends)
	}
}

func TestLateSteeringIsQueuedForTheNextTurn(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{Text: "first"}, {Text: "second"}}, agentloop.Config{})
	a := e.create("a").Agent
	// Steer from the continuation gate: after the step's last drain, so the
	// message is left over when the turn ends.
	once := sync.Once{}
	agentloop.EventContinuation.On(e.root, func(ctx stdctx.Context, c agentloop.Continuation, next waterfall.Next[agentloop.Continuation, bool]) (bool, error) {
		once.Do(func() { c.Agent.Steer(user("late")) })
		return false, nil
	})
	a.Followup(user("start"))
	idle(t, a)
	assertTrace(t, a.Session(),
		"turn/start", "user/message:start",
		"step/start", "assistant/message", "step/end", "turn/end:completed",
		"turn/start", "user/message:late",
		"step/start", "assistant/message", "step/end", "turn/end:completed")
}

func TestFailuresEndTheTurnNotTheLoop(t *testing.T) {
	cases := []struct {
		name    string
		replies []scripted.Reply
		install func(e *env)
		want    string
	}{
		{"listener error", nil, func(e *env) {
			agentloop.EventStepResult.On(e.root, func(ctx stdctx.Context, r agentloop.StepResult, next waterfall.Next[agentloop.StepResult, agentloop.StepResult]) (agentloop.StepResult, error) {
				if r.Turn == 1 {
					return r, errors.New("plugin broke")
				}
				return next.Call(ctx, r)
			})
		}, "plugin broke"},
		{"listener panic", nil, func(e *env) {
			agentloop.EventRequest.On(e.root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
				if ev.Turn == 1 {
					panic("listener exploded")
				}
				return next.Call(ctx, ev)
			})
		}, "listener exploded"},
		{"model error", []scripted.Reply{{Finish: "error", Error: "overloaded"}, {Text: "fine"}}, nil, "overloaded"},
		{"tool panic", []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "bomb"}}}, {Text: "fine"}}, func(e *env) {
			e.tool("bomb", func(stdctx.Context, tools.Call) (tools.Result, error) { panic("tool exploded") })
		}, "tool exploded"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.replies, agentloop.Config{})
			if tc.install != nil {
				tc.install(e)
			}
			var mu sync.Mutex
			var reported []error
			agents.EventError.On(e.root, func(_ stdctx.Context, r agents.ErrorReport) error {
				mu.Lock()
				reported = append(reported, r.Err)
				mu.Unlock()
				return nil
			})
			a := e.create("a").Agent
			a.Followup(user("one"))
			idle(t, a)
			a.Followup(user("two"))
			idle(t, a)
			if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"error", "completed"}) {
				t.Fatalf("turn ends %v", ends)
			}
			var endErr string
			for _, ev := range a.Session().Events(1) {
				if ev.Type == session.TurnEnd && ev.Reason == "error" {
					endErr = ev.Error
				}
			}
			if !strings.Contains(endErr, tc.want) {
				t.Fatalf("turn/end error %q lacks %q", endErr, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(reported) != 1 || !strings.Contains(reported[0].Error(), tc.want) {
				t.Fatalf("agent/error reports %v", reported)
			}
		})
	}
}

func TestToolErrorIsAResultNotAFailure(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "flaky"}, {Name: "nope"}}}, {Text: "ok"}}, agentloop.Config{})
	e.tool("flaky", func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{}, errors.New("disk full") })
	a := e.create("a").Agent
	a.Followup(user("x"))
	idle(t, a)
	var results []string
	for _, ev := range a.Session().Events(1) {
		if ev.Type == session.ToolResult {
			results = append(results, ev.Message.Content)
			if !ev.Message.IsError {
				t.Fatal("a failed tool's result must be marked as an error")
			}
		}
	}
	if !slices.Equal(results, []string{"disk full", `unknown tool "nope"`}) || turnEnds(a.Session())[0] != "completed" {
		t.Fatalf("results %v ends %v", results, turnEnds(a.Session()))
	}
}

func TestMaxTokens(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{Text: "cut", ToolCalls: []scripted.Call{{Name: "never"}}, Finish: "max-tokens"},
		{Text: "finished later"},
		{Text: "next turn"},
	}, agentloop.Config{})
	ran := false
	e.tool("never", func(stdctx.Context, tools.Call) (tools.Result, error) { ran = true; return tools.Result{}, nil })
	// Steering makes the turn take a second step, which completes; the turn
	// still reports max-tokens.
	once := sync.Once{}
	agentloop.EventStepResult.On(e.root, func(ctx stdctx.Context, r agentloop.StepResult, next waterfall.Next[agentloop.StepResult, agentloop.StepResult]) (agentloop.StepResult, error) {
		once.Do(func() { r.Agent.Steer(user("go on")) })
		return next.Call(ctx, r)
	})
	a := e.create("a").Agent
	a.Followup(user("long"))
	idle(t, a)
	a.Followup(user("again"))
	idle(t, a)
	if ran {
		t.Fatal("a tool call of a max-tokens reply ran")
	}
	if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"max-tokens", "completed"}) {
		t.Fatalf("turn ends %v", ends)
	}
	// The unrun call is still answered, so the history stays valid.
	h := a.Session().History()
	if m := h.At(2); m.Role != llm.RoleTool || !m.IsError || m.ToolCallID != "call_1" {
		t.Fatalf("unrun call not answered: %+v", m)
	}
}

func TestAbortEndsTheStepQueuedStillRuns(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "wait"}}}, {Text: "after"}}, agentloop.Config{})
	g := newGate()
	e.tool("wait", g.run)
	a := e.create("a").Agent
	a.Followup(user("first"))
	g.wait(t)
	a.Followup(user("second"))
	a.Abort()
	idle(t, a)
	if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"aborted", "completed"}) {
		t.Fatalf("turn ends %v", ends)
	}
}

func TestCancelGovernsExactlyOneTurn(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "wait"}}}, {Text: "answer"}}, agentloop.Config{})
	g := newGate()
	e.tool("wait", g.run)
	a := e.create("a").Agent
	a.Followup(user("first"))
	g.wait(t)
	a.Followup(user("queued, never runs"))
	a.Steer(user("steer, dropped"))
	a.Cancel(errors.New("user pressed ctrl-c"))
	idle(t, a)
	if a.Pending() != 0 {
		t.Fatalf("cancel left %d messages", a.Pending())
	}
	// A message after the cancel runs normally.
	g.open()
	a.Followup(user("later"))
	idle(t, a)
	assertTrace(t, a.Session(),
		"turn/start", "user/message:first",
		"step/start", "assistant/message", "tool/call:wait", "tool/result", "turn/end:aborted",
		"message/dropped", "message/dropped",
		"turn/start", "user/message:later",
		"step/start", "assistant/message", "step/end", "turn/end:completed")
	// Each dropped message is recorded with its text, the reason and who
	// cancelled; steering first, as it would have run first.
	var drops []session.Event
	for _, ev := range a.Session().Events(1) {
		if ev.Type == session.MessageDropped {
			drops = append(drops, ev)
		}
	}
	if len(drops) != 2 || drops[0].Message.Content != "steer, dropped" || drops[1].Message.Content != "queued, never runs" ||
		drops[0].Reason != "cancelled" || drops[0].By != "user pressed ctrl-c" || drops[0].Turn != 1 {
		t.Fatalf("dropped events %+v", drops)
	}
}

func TestCancelDropsATurnAboutToStart(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	a := e.create("a").Agent
	// Cancel as the status turns running: the turn does not start, and its
	// message is recorded as dropped.
	agents.EventStatus.On(a.Context(), func(_ stdctx.Context, c agents.StatusChange) error {
		if c.To == agents.StatusRunning {
			c.Agent.Cancel(nil)
		}
		return nil
	})
	a.Followup(user("doomed"))
	idle(t, a)
	assertTrace(t, a.Session(), "message/dropped")
	if ev := a.Session().Events(1)[0]; ev.Message.Content != "doomed" || ev.Reason != "cancelled" || ev.By == "" {
		t.Fatalf("dropped %+v", ev)
	}
}

func TestDisposeMidTurn(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "wait"}}}, {Text: "done"}}, agentloop.Config{})
	g := newGate()
	e.tool("wait", g.run)
	ha := e.create("a")
	hb := e.create("b")
	b := hb.Agent
	b.Followup(user("b's work"))
	var statuses []agents.Status
	var mu sync.Mutex
	agents.EventStatus.On(ha.Agent.Context(), func(_ stdctx.Context, c agents.StatusChange) error {
		mu.Lock()
		statuses = append(statuses, c.To)
		mu.Unlock()
		return nil
	})
	a := ha.Agent
	sess := a.Session()
	a.Followup(user("work"))
	g.wait(t)
	g.wait(t) // b's call too
	if err := ha.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ha.Dispose(stdctx.Background()); err != nil {
		t.Fatal("dispose must be idempotent:", err)
	}
	if ends := turnEnds(sess); !slices.Equal(ends, []string{"disposed"}) {
		t.Fatalf("turn ends %v", ends)
	}
	mu.Lock()
	if !slices.Equal(statuses, []agents.Status{agents.StatusRunning, agents.StatusDisposed}) {
		t.Fatalf("statuses %v", statuses)
	}
	mu.Unlock()
	if err := a.Followup(user("late")); !errs.HasCode(err, agents.AgentDisposed) {
		t.Fatalf("followup after dispose: %v", err)
	}
	if err := a.Steer(user("late")); !errs.HasCode(err, agents.AgentDisposed) {
		t.Fatalf("steer after dispose: %v", err)
	}
	if _, ok := e.registry.Get("a"); ok {
		t.Fatal("disposed agent still registered")
	}
	store, _ := session.Key.Get(e.root)
	if _, ok := store.Get(sess.ID()); ok {
		t.Fatal("disposed agent's session still open")
	}
	if a.Context().Active() {
		t.Fatal("disposed agent's scope still active")
	}
	// b is untouched.
	if b.Status() != agents.StatusRunning {
		t.Fatalf("b is %s", b.Status())
	}
	g.open()
	idle(t, b)
	if ends := turnEnds(b.Session()); len(ends) != 1 || ends[0] != "completed" {
		t.Fatalf("b's turns %v", ends)
	}
}

func TestConfiguredAgentsStartWithTheLoop(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{Agents: []agentloop.AgentConfig{
		{ID: "main", Options: agents.Options{Provider: "scripted", SystemPrompt: "You are terse."}},
		{ID: "helper", Options: agents.Options{Provider: "scripted"}},
	}})
	list := e.registry.List()
	if len(list) != 2 || list[0].ID() != "helper" || list[1].ID() != "main" {
		t.Fatalf("agents %v", list)
	}
	main := list[1]
	if !strings.HasPrefix(main.Session().ID(), "main-session-") || len(main.Session().ID()) != len("main-session-")+36 {
		t.Fatalf("session id %q", main.Session().ID())
	}
	main.Followup(user("hi"))
	idle(t, main)
	// The loop's fiber owns them.
	e.loop.Dispose(stdctx.Background())
	if len(e.registry.List()) != 0 {
		t.Fatal("agents outlived the loop")
	}
	if main.Status() != agents.StatusDisposed {
		t.Fatalf("main is %s", main.Status())
	}
}
