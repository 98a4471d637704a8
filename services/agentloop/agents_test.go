package agentloop_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

func TestFactorySeam(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	reg, _ := agents.Key.Get(root)
	_, err := reg.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a"})
	if !errs.HasCode(err, agents.NoFactory) || !strings.Contains(err.Error(), "agent loop") {
		t.Fatalf("create without a factory: %v", err)
	}
	_, err = reg.Resume(stdctx.Background(), agents.ResumeOptions{AgentID: "a", ResumeSessionID: "s"})
	if !errs.HasCode(err, agents.NoFactory) {
		t.Fatalf("resume without a factory: %v", err)
	}
	first, _ := root.Plugin(agentloop.Plugin, nil)
	if err := first.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	// A second loop cannot provide agentLoop nor register as factory.
	second, _ := root.Plugin(agentloop.Plugin, nil)
	if err := second.Await(stdctx.Background()); err == nil {
		t.Fatal("a second agent loop must fail")
	}
	if err := reg.SetFactory(root, nil); !errs.HasCode(err, agents.FactoryExists) {
		t.Fatalf("second factory: %v", err)
	}
	first.Dispose(stdctx.Background())
	if _, err := reg.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a"}); !errs.HasCode(err, agents.NoFactory) {
		t.Fatalf("factory must go with its fiber: %v", err)
	}
}

func TestCreateRules(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	e.create("a")
	_, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a"})
	if !errs.HasCode(err, agents.AgentExists) {
		t.Fatalf("duplicate id: %v", err)
	}
	if _, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: " "}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("blank id: %v", err)
	}
	var setupScope *dshctx.Context
	for _, fail := range []func(){func() {}, func() { panic("setup exploded") }} {
		_, err = e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "b", SessionID: "b-fixed", Setup: func(c *dshctx.Context) error {
			setupScope = c
			if c.Tag() != "b" {
				t.Errorf("setup runs in the agent scope, got tag %q", c.Tag())
			}
			fail()
			return errors.New("setup refused")
		}})
		if err == nil {
			t.Fatal("a failing setup must fail create")
		}
		if _, ok := e.registry.Get("b"); ok {
			t.Fatal("agent published despite failed setup")
		}
		if setupScope.Active() {
			t.Fatal("the failed agent's scope is still active")
		}
		store, _ := session.Key.Get(e.root)
		if _, ok := store.Get("b-fixed"); ok {
			t.Fatal("the failed agent's session is still open")
		}
	}
	// The id is free again.
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "b", SessionID: "b-fixed", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	h.Dispose(stdctx.Background())
}

func TestResumeNeedsABackend(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	_, err := e.registry.Resume(stdctx.Background(), agents.ResumeOptions{AgentID: "a", ResumeSessionID: "old"})
	if !errs.HasCode(err, session.NoPersistence) || !strings.Contains(err.Error(), "old") {
		t.Fatalf("resume without backend: %v", err)
	}
}

// memoryBackend keeps copies of the logs of disposed sessions.
type memoryBackend struct{ logs map[string][]session.Event }

func (m *memoryBackend) Load(_ stdctx.Context, id string) ([]session.Event, error) {
	l, ok := m.logs[id]
	if !ok {
		return nil, fmt.Errorf("no session %q", id)
	}
	return l, nil
}

func TestResumeReplaysTheLog(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	store, _ := session.Key.Get(e.root)
	backend := &memoryBackend{logs: map[string][]session.Event{}}
	if err := store.SetBackend(e.root, backend); err != nil {
		t.Fatal(err)
	}
	h, _ := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", SessionID: "s1", Options: agents.Options{Provider: "scripted"}})
	h.Agent.Followup(user("one"))
	idle(t, h.Agent)
	h.Agent.Followup(user("two"))
	idle(t, h.Agent)
	before := h.Agent.Session().History().Messages()
	backend.logs["s1"] = h.Agent.Session().Events(1)
	h.Dispose(stdctx.Background())

	r, err := e.registry.Resume(stdctx.Background(), agents.ResumeOptions{AgentID: "a", ResumeSessionID: "s1", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Dispose(stdctx.Background())
	if got := r.Agent.Session().History().Messages(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("resumed history differs:\n%v\n%v", got, before)
	}
	r.Agent.Followup(user("three"))
	idle(t, r.Agent)
	evs := r.Agent.Session().Events(1)
	last := evs[len(evs)-1]
	if last.Type != session.TurnEnd || last.Turn != 3 {
		t.Fatalf("turn numbering did not continue: %+v", last)
	}
}

func TestAgentEventsAndStatusOnlyOnChange(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	var mu sync.Mutex
	var log []string
	add := func(s string) { mu.Lock(); log = append(log, s); mu.Unlock() }
	agents.EventCreated.On(e.root, func(_ stdctx.Context, a agents.Agent) error { add("created " + a.ID()); return nil })
	agents.EventDisposed.On(e.root, func(_ stdctx.Context, a agents.Agent) error { add("disposed " + a.ID()); return nil })
	agents.EventStatus.On(e.root, func(_ stdctx.Context, c agents.StatusChange) error {
		add(fmt.Sprintf("status %s %s->%s", c.Agent.ID(), c.From, c.To))
		return nil
	})
	h, _ := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "scripted"}})
	// Hold the first turn until the second message is queued, so the two
	// turns run back to back: one change to running, one back to idle.
	queued := make(chan struct{})
	agentloop.EventRequest.On(e.root, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		if ev.Turn == 1 {
			<-queued
		}
		return next.Call(ctx, ev)
	})
	h.Agent.Followup(user("1"))
	h.Agent.Followup(user("2"))
	close(queued)
	idle(t, h.Agent)
	h.Dispose(stdctx.Background())
	mu.Lock()
	defer mu.Unlock()
	want := []string{"created a", "status a idle->running", "status a running->idle", "status a idle->disposed", "disposed a"}
	if !slices.Equal(log, want) {
		t.Fatalf("events\n got %v\nwant %v", log, want)
	}
}

func TestScopeIsolation(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	ha := e.create("a")
	hb := e.create("b")
	var mu sync.Mutex
	heard := map[string]int{}
	hear := func(what string) { mu.Lock(); heard[what]++; mu.Unlock() }
	actx := ha.Agent.Context()
	agents.EventStatus.On(actx, func(_ stdctx.Context, c agents.StatusChange) error { hear("status:" + c.Agent.ID()); return nil })
	session.EventAppended.On(actx, func(_ stdctx.Context, ap session.Appended) error { hear("session:" + ap.Session.AgentID()); return nil })
	agentloop.EventRequest.On(actx, func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		hear("request:" + ev.Agent.ID())
		return next.Call(ctx, ev)
	})
	tools.EventExecute.On(actx, func(ctx stdctx.Context, x tools.Execution, next waterfall.Next[tools.Execution, tools.Result]) (tools.Result, error) {
		hear("tool:" + x.Call.AgentID)
		return next.Call(ctx, x)
	})
	hb.Agent.Followup(user("only b"))
	idle(t, hb.Agent)
	mu.Lock()
	if len(heard) != 0 {
		t.Fatalf("a's listeners heard b: %v", heard)
	}
	mu.Unlock()
	ha.Agent.Followup(user("now a"))
	idle(t, ha.Agent)
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{"status:a", "session:a", "request:a"} {
		if heard[k] == 0 {
			t.Fatalf("a's listener missed %s: %v", k, heard)
		}
	}
	for k := range heard {
		if strings.HasSuffix(k, ":b") {
			t.Fatalf("heard b: %v", heard)
		}
	}
}

func TestFailingFlushIsReportedAndLoopGoesOn(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	session.EventFlush.On(e.root, func(ctx stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		return struct{}{}, errors.New("disk full")
	})
	var mu sync.Mutex
	var reports []error
	agents.EventError.On(e.root, func(_ stdctx.Context, r agents.ErrorReport) error {
		mu.Lock()
		reports = append(reports, r.Err)
		mu.Unlock()
		return nil
	})
	a := e.create("a").Agent
	a.Followup(user("1"))
	idle(t, a)
	a.Followup(user("2"))
	idle(t, a)
	if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"completed", "completed"}) {
		t.Fatalf("turns %v", ends)
	}
	mu.Lock()
	defer mu.Unlock()
	// Two checkpoints per turn: after the prompt, and at the end.
	if len(reports) != 4 || !errs.HasCode(reports[0], session.FlushFailed) || !strings.Contains(reports[0].Error(), "disk full") {
		t.Fatalf("reports %v", reports)
	}
}

// TestFlushSeesThePromptThenTheWholeTurn: the first checkpoint of a turn
// covers its user message, the last one the whole turn.
func TestFlushSeesThePromptThenTheWholeTurn(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	var seqs []int64
	session.EventFlush.On(e.root, func(ctx stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		seqs = append(seqs, f.Seq)
		if int64(f.Session.Len()) != f.Seq {
			t.Errorf("flush checkpoint %d but log has %d", f.Seq, f.Session.Len())
		}
		return next.Call(ctx, f)
	})
	a := e.create("a").Agent
	a.Followup(user("1"))
	idle(t, a)
	if len(seqs) != 2 || seqs[0] != 2 || seqs[1] != int64(a.Session().Len()) {
		t.Fatalf("flushes %v, log %d", seqs, a.Session().Len())
	}
}

// TestThePromptIsDurableBeforeTheModelIsCalled: by the time the provider
// is asked, a session/flush checkpoint has covered every user message of
// the turn, so a process killed mid-stream keeps the prompt.
func TestThePromptIsDurableBeforeTheModelIsCalled(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	var mu sync.Mutex
	var flushed int64
	session.EventFlush.On(e.root, func(ctx stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		mu.Lock()
		flushed = f.Seq
		mu.Unlock()
		return next.Call(ctx, f)
	})
	var atCall []int64
	var prompts []int64
	e.registerProvider("durable", providerFunc(func(_ stdctx.Context, req llm.Request) (llm.Stream, error) {
		mu.Lock()
		atCall = append(atCall, flushed)
		mu.Unlock()
		return &sliceStream{chunks: []llm.Chunk{{Kind: llm.ChunkText, Text: "ok"}, {Kind: llm.ChunkFinish, Finish: llm.FinishStop}}}, nil
	}))
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "durable"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(stdctx.Background())
	h.Agent.Followup(user("keep me"))
	idle(t, h.Agent)
	for _, ev := range h.Agent.Session().Events(1) {
		if ev.Type == session.UserMessage {
			prompts = append(prompts, ev.Seq)
		}
	}
	if len(atCall) != 1 || len(prompts) != 1 || atCall[0] < prompts[0] {
		t.Fatalf("the model was called with the log flushed up to %v; the prompt is event %v", atCall, prompts)
	}
}

type providerFunc func(stdctx.Context, llm.Request) (llm.Stream, error)

func (f providerFunc) Stream(ctx stdctx.Context, req llm.Request) (llm.Stream, error) {
	return f(ctx, req)
}

// TestAFencedCheckpointStopsTheTurn: once a checkpoint says another owner
// writes the session (a shared store's lease ran out while this host
// stalled), the turn ends before the model is asked, where it used to go
// on and answer a turn the log records as interrupted.
func TestAFencedCheckpointStopsTheTurn(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	session.EventFlush.On(e.root, func(ctx stdctx.Context, f session.Flush, next waterfall.Next[session.Flush, struct{}]) (struct{}, error) {
		return struct{}{}, errs.New(session.SessionLocked, "another writer appended").WithReason(session.ReasonFenced)
	})
	var mu sync.Mutex
	calls := 0
	e.registerProvider("fenced", providerFunc(func(_ stdctx.Context, req llm.Request) (llm.Stream, error) {
		mu.Lock()
		calls++
		mu.Unlock()
		return &sliceStream{chunks: []llm.Chunk{{Kind: llm.ChunkText, Text: "ok"}, {Kind: llm.ChunkFinish, Finish: llm.FinishStop}}}, nil
	}))
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "a", Options: agents.Options{Provider: "fenced"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(stdctx.Background())
	a := h.Agent
	a.Followup(user("1"))
	idle(t, a)
	mu.Lock()
	defer mu.Unlock()
	if calls != 0 {
		t.Fatalf("the model was asked %d times after the session was fenced", calls)
	}
	if ends := turnEnds(a.Session()); !slices.Equal(ends, []string{"aborted"}) {
		t.Fatalf("turns %v", ends)
	}
}
