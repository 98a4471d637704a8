package agentloop_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// safeTool registers a parallel-safe tool on the root.
func (e *env) safeTool(name string, run func(stdctx.Context, tools.Call) (tools.Result, error)) {
	e.t.Helper()
	if err := e.tools.Register(e.root, tools.Tool{Name: name, Description: "test tool", ParallelSafe: true, Execute: run}); err != nil {
		e.t.Fatal(err)
	}
}

// createWith makes an agent on the scripted provider with opts.
func (e *env) createWith(id string, opts agents.Options) agents.Agent {
	e.t.Helper()
	opts.Provider = "scripted"
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: id, Options: opts})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { h.Dispose(stdctx.Background()) })
	return h.Agent
}

func calls(names ...string) []scripted.Call {
	out := make([]scripted.Call, len(names))
	for i, n := range names {
		out[i] = scripted.Call{Name: n}
	}
	return out
}

// results returns the tool results of the history, in its order.
func results(s *session.Session) []llm.Message {
	var out []llm.Message
	h := s.History()
	for i := range h.Len() {
		if m := h.At(i); m.Role == llm.RoleTool {
			out = append(out, m)
		}
	}
	return out
}

// assertEachCallAnsweredOnce replays the session's log — what a resumed
// session and every provider would get — and checks that each call of an
// assistant message has exactly one result, after the message.
func assertEachCallAnsweredOnce(t testing.TB, s *session.Session) {
	t.Helper()
	h, err := session.Replay(s.Events(1))
	if err != nil {
		t.Fatalf("the log does not replay: %v", err)
	}
	open := map[string]int{}
	for i := range h.Len() {
		m := h.At(i)
		for _, c := range m.ToolCalls {
			open[c.ID]++
		}
		if m.Role == llm.RoleTool {
			if open[m.ToolCallID] != 1 {
				t.Fatalf("result %d answers %q, which has %d open calls", i, m.ToolCallID, open[m.ToolCallID])
			}
			open[m.ToolCallID]--
		}
	}
	for id, n := range open {
		if n != 0 {
			t.Fatalf("call %q is left without a result", id)
		}
	}
}

func receive[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// TestParallelResultsAreRecordedInCallOrder: three parallel-safe calls
// finishing last-first are recorded, and sent to the model, first-first,
// each after all the calls of its group started.
func TestParallelResultsAreRecordedInCallOrder(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: calls("p", "p", "p")}, {Text: "done"}}, agentloop.Config{})
	release := map[string]chan struct{}{"call_1": make(chan struct{}), "call_2": make(chan struct{}), "call_3": make(chan struct{})}
	entered, finished := make(chan string, 3), make(chan string, 3)
	e.safeTool("p", func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		entered <- c.ID
		<-release[c.ID]
		defer func() { finished <- c.ID }()
		return tools.Result{Content: "from " + c.ID}, nil
	})
	a := e.create("a").Agent
	a.Followup(user("go"))
	for range 3 {
		receive(t, entered, "a call of the group")
	}
	for _, id := range []string{"call_3", "call_2", "call_1"} {
		close(release[id])
		if got := receive(t, finished, "a call to finish"); got != id {
			t.Fatalf("%s finished when %s was released", got, id)
		}
	}
	idle(t, a)
	assertTrace(t, a.Session(), "turn/start", "user/message:go",
		"step/start", "assistant/message", "tool/call:p", "tool/call:p", "tool/call:p",
		"tool/result", "tool/result", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end:completed")
	rs := results(a.Session())
	for i, r := range rs {
		id := fmt.Sprintf("call_%d", i+1)
		if r.ToolCallID != id || r.Content != "from "+id || r.IsError {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if len(rs) != 3 {
		t.Fatalf("%d results", len(rs))
	}
}

// TestTheParallelCapComesFromTheAgentOrTheLoop: no more parallel-safe
// calls run at once than the agent's max_parallel_tools, else the loop's,
// and that many do.
func TestTheParallelCapComesFromTheAgentOrTheLoop(t *testing.T) {
	for _, tc := range []struct {
		name              string
		loopCap, agentCap int
		want              int
	}{
		{"agent", 5, 2, 2},
		{"loop", 3, 0, 3},
		{"default", 0, 0, agentloop.DefaultMaxParallelTools},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 10
			e := newEnv(t, []scripted.Reply{{ToolCalls: calls(slices.Repeat([]string{"p"}, n)...)}, {Text: "done"}},
				agentloop.Config{MaxParallelTools: tc.loopCap})
			var exited atomic.Int32
			entered, release := make(chan struct{}, n), make(chan struct{})
			e.safeTool("p", func(stdctx.Context, tools.Call) (tools.Result, error) {
				entered <- struct{}{}
				<-release
				exited.Add(1)
				return tools.Result{Content: "ok"}, nil
			})
			// tool/call is appended on the driver right before its call
			// starts: the calls started and not returned must leave room.
			var started int
			var mu sync.Mutex
			var violations []string
			session.EventAppended.On(e.root, func(_ stdctx.Context, ap session.Appended) error {
				if ap.Event.Type == session.ToolCall {
					mu.Lock()
					if in := started - int(exited.Load()); in >= tc.want {
						violations = append(violations, fmt.Sprintf("%s started with %d in flight", ap.Event.ToolCall.ID, in))
					}
					started++
					mu.Unlock()
				}
				return nil
			})
			a := e.createWith("a", agents.Options{MaxParallelTools: tc.agentCap})
			a.Followup(user("go"))
			for range tc.want {
				receive(t, entered, "a call up to the cap")
			}
			for range n - tc.want {
				release <- struct{}{}
				receive(t, entered, "the call that took the freed slot")
			}
			for range tc.want {
				release <- struct{}{}
			}
			idle(t, a)
			mu.Lock()
			defer mu.Unlock()
			if started != n || len(violations) > 0 {
				t.Fatalf("%d calls started; cap %d violated: %v", started, tc.want, violations)
			}
		})
	}
}

// TestAnExclusiveCallSplitsTheStep: in [p p x p p] the first two calls run
// together, x alone after both, the last two together after x.
func TestAnExclusiveCallSplitsTheStep(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: calls("p", "p", "x", "p", "p")}, {Text: "done"}}, agentloop.Config{})
	var mu sync.Mutex
	var tl []string
	mark := func(s string) { mu.Lock(); tl = append(tl, s); mu.Unlock() }
	// Each group's two calls wait for each other: a schedule that ran
	// them one after the other would fail here instead of passing.
	pair := map[string]chan struct{}{"call_1": make(chan struct{}), "call_2": make(chan struct{}), "call_4": make(chan struct{}), "call_5": make(chan struct{})}
	other := map[string]string{"call_1": "call_2", "call_2": "call_1", "call_4": "call_5", "call_5": "call_4"}
	e.safeTool("p", func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		mark("start " + c.ID)
		defer mark("end " + c.ID)
		close(pair[c.ID])
		select {
		case <-pair[other[c.ID]]:
			return tools.Result{Content: "ok"}, nil
		case <-time.After(10 * time.Second):
			return tools.Result{}, errors.New("the other call of the group never ran beside this one")
		}
	})
	e.tool("x", func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		mark("start " + c.ID)
		defer mark("end " + c.ID)
		return tools.Result{Content: "ok"}, nil
	})
	a := e.create("a").Agent
	a.Followup(user("go"))
	idle(t, a)
	assertTrace(t, a.Session(), "turn/start", "user/message:go",
		"step/start", "assistant/message",
		"tool/call:p", "tool/call:p", "tool/result", "tool/result",
		"tool/call:x", "tool/result",
		"tool/call:p", "tool/call:p", "tool/result", "tool/result", "step/end",
		"step/start", "assistant/message", "step/end", "turn/end:completed")
	for _, r := range results(a.Session()) {
		if r.IsError {
			t.Fatalf("%s: %s", r.ToolCallID, r.Content)
		}
	}
	at := func(s string) int { return slices.Index(tl, s) }
	for _, o := range [][2]string{{"end call_1", "start call_3"}, {"end call_2", "start call_3"}, {"end call_3", "start call_4"}, {"end call_3", "start call_5"}} {
		if at(o[0]) < 0 || at(o[0]) > at(o[1]) {
			t.Fatalf("%q must come before %q: %v", o[0], o[1], tl)
		}
	}
}

// TestAbortMidGroup: an abort while two parallel calls run cancels both;
// the exclusive call and the call after it never start; all four calls
// are answered; the model is not asked again; the turn ends aborted.
func TestAbortMidGroup(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: calls("p", "p", "x", "p")}, {Text: "never asked"}}, agentloop.Config{})
	requests := countRequests(e)
	g := newGate()
	e.safeTool("p", g.run)
	var xRan atomic.Bool
	e.tool("x", func(stdctx.Context, tools.Call) (tools.Result, error) {
		xRan.Store(true)
		return tools.Result{Content: "ran"}, nil
	})
	a := e.create("a").Agent
	a.Followup(user("go"))
	g.wait(t)
	g.wait(t)
	a.Abort()
	idle(t, a)
	assertTrace(t, a.Session(), "turn/start", "user/message:go",
		"step/start", "assistant/message", "tool/call:p", "tool/call:p",
		"tool/result", "tool/result", "tool/result", "tool/result", "turn/end:aborted")
	if xRan.Load() || len(g.entered) > 0 {
		t.Fatal("a call after the abort started")
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("the model was called %d times", n)
	}
	want := []string{
		"interrupted: the turn was aborted while this call ran; it may have partly run",
		"interrupted: the turn was aborted while this call ran; it may have partly run",
		"not executed: the turn was aborted",
		"not executed: the turn was aborted",
	}
	rs := results(a.Session())
	for i, r := range rs {
		if r.ToolCallID != fmt.Sprintf("call_%d", i+1) || !r.IsError || r.Content != want[i] {
			t.Fatalf("result %d: %+v", i, r)
		}
	}
	if len(rs) != 4 {
		t.Fatalf("%d results for 4 calls", len(rs))
	}
	assertEachCallAnsweredOnce(t, a.Session())
}

// TestAbortMidGroupWaitsForAToolThatIgnoresIt: a parallel call that
// ignores the abort delays the end of the turn, not more: its result is
// kept, its sibling is cancelled, the call after them never starts, the
// model is not asked again, the turn ends aborted.
func TestAbortMidGroupWaitsForAToolThatIgnoresIt(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: calls("stubborn", "p", "p")}, {Text: "never asked"}}, agentloop.Config{})
	requests := countRequests(e)
	entered, release := make(chan struct{}, 1), make(chan struct{})
	e.safeTool("stubborn", func(stdctx.Context, tools.Call) (tools.Result, error) {
		entered <- struct{}{}
		<-release // ignores its context
		return tools.Result{Content: "done anyway"}, nil
	})
	g := newGate()
	e.safeTool("p", g.run)
	a := e.createWith("a", agents.Options{MaxParallelTools: 2})
	a.Followup(user("go"))
	receive(t, entered, "the stubborn call")
	g.wait(t)
	a.Abort()
	close(release)
	idle(t, a)
	if len(g.entered) > 0 {
		t.Fatal("the third call started after the abort")
	}
	if n := requests.Load(); n != 1 {
		t.Fatalf("the model was called %d times", n)
	}
	if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"aborted"}) {
		t.Fatalf("turn ends %v", ends)
	}
	rs := results(a.Session())
	if len(rs) != 3 || rs[0].Content != "done anyway" || rs[0].IsError ||
		!strings.HasPrefix(rs[1].Content, "interrupted:") || rs[2].Content != "not executed: the turn was aborted" {
		t.Fatalf("results %+v", rs)
	}
	assertEachCallAnsweredOnce(t, a.Session())
}

// TestAPanicInAGroupFailsTheTurn: a tool that panics beside another call
// fails the turn with TOOL_PANICKED; the sibling is cancelled, the call
// after them never starts, every call is answered, and the agent serves
// its next message.
func TestAPanicInAGroupFailsTheTurn(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: calls("boom", "p", "x")}, {Text: "after"}}, agentloop.Config{})
	g := newGate()
	e.safeTool("p", g.run)
	e.safeTool("boom", func(stdctx.Context, tools.Call) (tools.Result, error) {
		<-g.entered // panic once the sibling runs
		panic("tool bug")
	})
	var xRan atomic.Bool
	e.tool("x", func(stdctx.Context, tools.Call) (tools.Result, error) {
		xRan.Store(true)
		return tools.Result{Content: "ran"}, nil
	})
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
	if xRan.Load() {
		t.Fatal("the call after the panic ran")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 || !errs.HasCode(reported[0], tools.ToolPanicked) {
		t.Fatalf("reported %v; want one %s", reported, tools.ToolPanicked)
	}
	rs := results(a.Session())
	if len(rs) != 3 || !strings.HasPrefix(rs[0].Content, "failed: the turn ended: ") ||
		!strings.HasPrefix(rs[1].Content, "interrupted: another call of this step failed") ||
		rs[2].Content != "not executed: the turn ended" {
		t.Fatalf("results %+v", rs)
	}
	for _, r := range rs {
		if !r.IsError {
			t.Fatalf("%s is not an error result: %q", r.ToolCallID, r.Content)
		}
	}
	assertEachCallAnsweredOnce(t, a.Session())
}

// TestDisposeMidGroup: disposing the agent while a group runs cancels the
// running calls, starts none after them, answers every call, and ends the
// turn disposed.
func TestDisposeMidGroup(t *testing.T) {
	e := newEnv(t, []scripted.Reply{{ToolCalls: calls("p", "p", "x")}, {Text: "never asked"}}, agentloop.Config{})
	g := newGate()
	e.safeTool("p", g.run)
	var xRan atomic.Bool
	e.tool("x", func(stdctx.Context, tools.Call) (tools.Result, error) {
		xRan.Store(true)
		return tools.Result{Content: "ran"}, nil
	})
	var events []session.Event
	var mu sync.Mutex
	session.EventAppended.On(e.root, func(_ stdctx.Context, ap session.Appended) error {
		mu.Lock()
		events = append(events, ap.Event)
		mu.Unlock()
		return nil
	})
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	h.Agent.Followup(user("go"))
	g.wait(t)
	g.wait(t)
	if err := h.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if xRan.Load() {
		t.Fatal("the exclusive call ran after the dispose")
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, ev := range events {
		switch ev.Type {
		case session.ToolResult:
			got = append(got, ev.Message.Content)
		case session.TurnEnd:
			got = append(got, "turn/end:"+ev.Reason)
		}
	}
	want := []string{
		"interrupted: the turn was disposed while this call ran; it may have partly run",
		"interrupted: the turn was disposed while this call ran; it may have partly run",
		"not executed: the turn was disposed",
		"turn/end:disposed",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("results and end\n got %q\nwant %q", got, want)
	}
}

// TestToolCallsCarryTheWorkspace: a call carries the agent's workspace,
// made absolute; without one, the directory dsh runs in.
func TestToolCallsCarryTheWorkspace(t *testing.T) {
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, tc := range []struct{ opt, want string }{{dir, dir}, {"", cwd}} {
		e := newEnv(t, []scripted.Reply{{ToolCalls: calls("where")}, {Text: "done"}}, agentloop.Config{})
		got := make(chan string, 1)
		e.safeTool("where", func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
			got <- c.Workspace
			return tools.Result{Content: "ok"}, nil
		})
		a := e.createWith("a", agents.Options{Workspace: tc.opt})
		a.Followup(user("go"))
		idle(t, a)
		if w := receive(t, got, "the call"); w != tc.want {
			t.Fatalf("workspace %q gave calls %q, want %q", tc.opt, w, tc.want)
		}
	}
}
