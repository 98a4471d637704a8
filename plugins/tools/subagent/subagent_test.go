package subagent_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/session/jsonl"
	"github.com/dsh-go/dsh/plugins/tools/subagent"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	t     testing.TB
	root  *dshctx.Context
	ctl   *sessions.Controller
	tools *tools.Service
	reg   *agents.Registry
}

type setup struct {
	parent, child []scripted.Reply
	tool          subagent.Config
	dir           string // session.jsonl directory when set
}

// calls is a scripted reply calling the agent tool once per agent name.
func calls(names ...string) scripted.Reply {
	var r scripted.Reply
	for _, n := range names {
		r.ToolCalls = append(r.ToolCalls, scripted.Call{Name: "agent", Arguments: `{"agent":"` + n + `","prompt":"do the ` + n + ` part"}`})
	}
	return r
}

func tool(name string) scripted.Reply {
	return scripted.Reply{ToolCalls: []scripted.Call{{Name: name}}}
}

func text(s string) scripted.Reply { return scripted.Reply{Text: s} }

// newEnv mounts the core services, a scripted "parent" and "child" model,
// the agent loop, both controllers and the agent tool at the root.
func newEnv(t testing.TB, s setup) *env {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	apply := func(p dshctx.Plugin, cfg any) {
		t.Helper()
		f, err := root.Plugin(p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
	}
	apply(scripted.Plugin, scripted.Config{Name: "parent", Replies: s.parent})
	apply(scripted.Plugin, scripted.Config{Name: "child", Replies: s.child})
	if s.dir != "" {
		apply(jsonl.Plugin, &jsonl.Config{Dir: s.dir})
	}
	apply(agentloop.Plugin, agentloop.Config{})
	apply(agentcontroller.Plugin, nil)
	apply(sessions.Plugin, nil)
	cfg := s.tool
	def := subagent.Config{}.Defaults()
	if cfg.Name == "" {
		cfg.Name = def.Name
	}
	if cfg.MaxConcurrent == 0 {
		cfg.MaxConcurrent = def.MaxConcurrent
	}
	if cfg.MaxDepth == 0 {
		cfg.MaxDepth = def.MaxDepth
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = def.Timeout
	}
	if cfg.Agents == nil {
		cfg.Agents = []subagent.Agent{
			{Name: "alpha", Description: "does alpha things", Provider: "child"},
			{Name: "beta", Description: "does beta things", Provider: "child"},
		}
	}
	apply(subagent.Plugin, cfg)
	ctl, _ := sessions.Key.Get(root)
	ts, _ := tools.Key.Get(root)
	reg, _ := agents.Key.Get(root)
	return &env{t: t, root: root, ctl: ctl, tools: ts, reg: reg}
}

// parent opens the parent's session and prompts it.
func (e *env) parent(prompt string) *sessions.Session {
	e.t.Helper()
	s, err := e.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "main", Options: agents.Options{Provider: "parent"}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = s.Close(stdctx.Background()) })
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1", Content: prompt}); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// idle waits, through the session service, until session id has nothing
// left to do.
func idle(t testing.TB, svc sessions.Service, id string) {
	t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := svc.Idle(ctx, id); err != nil {
		t.Fatalf("session %s never went idle: %v", id, err)
	}
}

// results are the tool results session id recorded, by call id, read
// through the session service.
func results(t testing.TB, svc sessions.Service, id string) map[string]llm.Message {
	t.Helper()
	evs, err := svc.History(stdctx.Background(), id, 0)
	if err != nil {
		t.Fatalf("history of session %s: %v", id, err)
	}
	out := map[string]llm.Message{}
	for _, e := range evs {
		if e.Type == session.ToolResult {
			out[e.Message.ToolCallID] = *e.Message
		}
	}
	return out
}

// idle waits until session s of e has nothing left to do.
func (e *env) idle(s *sessions.Session) { e.t.Helper(); idle(e.t, e.ctl, s.ID()) }

// results are the tool results session s of e recorded, by call id.
func (e *env) results(s *sessions.Session) map[string]llm.Message {
	e.t.Helper()
	return results(e.t, e.ctl, s.ID())
}

// agent returns the live agent of session s, from the agents registry:
// for the tests that drive what the session does not offer (an abort,
// a tool call in the agent's scope).
func (e *env) agent(s *sessions.Session) agents.Agent {
	e.t.Helper()
	a, ok := e.reg.Get(s.AgentID())
	if !ok {
		e.t.Fatalf("no agent %s runs for session %s", s.AgentID(), s.ID())
	}
	return a
}

// onlyParentLeft checks every child was disposed: one agent, one session.
func (e *env) onlyParentLeft(parent *sessions.Session) {
	e.t.Helper()
	if list := e.reg.List(); len(list) != 1 || list[0].ID() != parent.AgentID() {
		ids := []string{}
		for _, a := range list {
			ids = append(ids, a.ID())
		}
		e.t.Fatalf("agents left: %v", ids)
	}
	if n := len(e.ctl.Sessions()); n != 1 {
		e.t.Fatalf("%d sessions open, want the parent's only", n)
	}
}

// TestTwoChildrenOneStepOneRefused: the parent calls two subagents in one
// step; an admission listener that refuses subagent tasks for beta lets
// alpha answer and makes beta's call an error result the parent's model
// reads.
func TestTwoChildrenOneStepOneRefused(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha", "beta"), text("parent done")},
		child:  []scripted.Reply{text("alpha's answer")},
	})
	var mu sync.Mutex
	var sources []agentcontroller.Source
	_, err := agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Source.Kind == agentcontroller.SourceSubagent {
			mu.Lock()
			sources = append(sources, a.Source)
			mu.Unlock()
			if strings.HasPrefix(a.Agent.ID(), "beta@") {
				return agentcontroller.Reject("test/no-beta", "beta takes no tasks today", false), nil
			}
		}
		return next.Call(ctx, a)
	})
	if err != nil {
		t.Fatal(err)
	}
	var started []subagent.Started
	var ended []subagent.Ended
	if _, err := subagent.EventStarted.On(e.root, func(_ stdctx.Context, s subagent.Started) error {
		mu.Lock()
		started = append(started, s)
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := subagent.EventEnded.On(e.root, func(_ stdctx.Context, x subagent.Ended) error {
		mu.Lock()
		ended = append(ended, x)
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	p := e.parent("split the work")
	e.idle(p)
	mu.Lock()
	defer mu.Unlock()
	if len(started) != 2 || len(ended) != 2 {
		t.Fatalf("started %+v, ended %+v", started, ended)
	}
	for _, x := range ended {
		if p, _ := session.ParentOf(x.SessionID); p == "" || x.ParentAgentID == "" || x.Depth != 1 {
			t.Fatalf("ended: %+v", x)
		}
		if (x.Name == "beta") != x.Result.IsError {
			t.Fatalf("ended: %+v", x)
		}
	}
	res := e.results(p)
	if r := res["call_1"]; r.IsError || r.Content != "alpha's answer" {
		t.Fatalf("alpha's result: %+v", r)
	}
	if r := res["call_2"]; !r.IsError || !strings.HasPrefix(r.Content, string(subagent.Refused)) || !strings.Contains(r.Content, "beta takes no tasks today") {
		t.Fatalf("beta's result: %+v", r)
	}
	if len(sources) != 2 || sources[0].Unattended || sources[0].RPCID == "" {
		t.Fatalf("admission heard %+v", sources)
	}
	e.onlyParentLeft(p)
}

// TestChildrenRunConcurrently: both children must be inside the meet tool
// at once for either to leave it; sequential children would time out.
func TestChildrenRunConcurrently(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha", "beta"), text("parent done")},
		child:  []scripted.Reply{tool("meet"), text("met")},
	})
	var wg sync.WaitGroup
	wg.Add(2)
	both := make(chan struct{})
	go func() { wg.Wait(); close(both) }()
	err := e.tools.Register(e.root, tools.Tool{Name: "meet", ParallelSafe: true, Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
		wg.Done()
		select {
		case <-both:
			return tools.Result{Content: "met"}, nil
		case <-time.After(5 * time.Second):
			return tools.Result{Content: "alone", IsError: true}, nil
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.parent("meet")
	e.idle(p)
	for id, r := range e.results(p) {
		if r.IsError || r.Content != "met" {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	e.onlyParentLeft(p)
}

// TestConcurrencyCap: with max_concurrent 1 the children take turns, so
// the meet tool never sees two at once.
func TestConcurrencyCap(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha", "beta"), text("parent done")},
		child:  []scripted.Reply{tool("probe"), text("probed")},
		tool:   subagent.Config{MaxConcurrent: 1},
	})
	var mu sync.Mutex
	in, most := 0, 0
	err := e.tools.Register(e.root, tools.Tool{Name: "probe", ParallelSafe: true, Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
		mu.Lock()
		in++
		most = max(most, in)
		mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		mu.Lock()
		in--
		mu.Unlock()
		return tools.Result{Content: "ok"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.parent("probe")
	e.idle(p)
	if most != 1 {
		t.Fatalf("%d children ran at once under max_concurrent 1", most)
	}
	for id, r := range e.results(p) {
		if r.IsError {
			t.Fatalf("%s: %+v", id, r)
		}
	}
}

// TestCancelMidChild: cancelling (or aborting) the parent's turn while a
// child's tool runs ends the child's turn, answers the call as cancelled
// and leaves no child agent, session or goroutine behind.
func TestCancelMidChild(t *testing.T) {
	t.Run("cancel", func(t *testing.T) {
		testStopMidChild(t, func(_ *env, p *sessions.Session) error {
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
			defer cancel()
			return p.Cancel(ctx)
		})
	})
	t.Run("abort", func(t *testing.T) {
		testStopMidChild(t, func(e *env, p *sessions.Session) error {
			e.agent(p).Abort()
			return nil
		})
	})
}

func testStopMidChild(t *testing.T, stop func(*env, *sessions.Session) error) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		child:  []scripted.Reply{tool("block"), text("never")},
	})
	entered := make(chan agents.Agent, 1)
	childEnded := make(chan error, 1)
	err := e.tools.Register(e.root, tools.Tool{Name: "block", Execute: func(ctx stdctx.Context, c tools.Call) (tools.Result, error) {
		a, _ := e.reg.Get(c.AgentID)
		entered <- a
		<-ctx.Done()
		childEnded <- ctx.Err()
		return tools.Result{}, ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.parent("start")
	var child agents.Agent
	select {
	case child = <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the child never ran its tool")
	}
	if err := stop(e, p); err != nil {
		t.Fatal(err)
	}
	select {
	case <-childEnded:
	case <-time.After(10 * time.Second):
		t.Fatal("the child's tool call was never cancelled")
	}
	e.idle(p)
	r := e.results(p)["call_1"]
	if !r.IsError || !strings.Contains(r.Content, "cancelled") {
		t.Fatalf("the call's result: %+v", r)
	}
	if child.Status() != agents.StatusDisposed {
		t.Fatalf("the child is %s", child.Status())
	}
	var end session.Event
	for _, ev := range child.Session().Events(1) {
		if ev.Type == session.TurnEnd {
			end = ev
		}
	}
	if end.Reason != agentloop.ReasonAborted {
		t.Fatalf("the child's turn ended %q, want aborted", end.Reason)
	}
	e.onlyParentLeft(p)
}

// TestTimeout: a child that does not finish in time is cancelled and the
// call fails with SUBAGENT_TIMEOUT.
func TestTimeout(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		child:  []scripted.Reply{tool("block"), text("never")},
		tool:   subagent.Config{Timeout: 100 * time.Millisecond},
	})
	err := e.tools.Register(e.root, tools.Tool{Name: "block", Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.parent("start")
	e.idle(p)
	if r := e.results(p)["call_1"]; !r.IsError || !strings.HasPrefix(r.Content, string(subagent.TimedOut)) {
		t.Fatalf("the call's result: %+v", r)
	}
	e.onlyParentLeft(p)
}

// TestChildAskGoesToParentsAnswerer: a child's call that needs approval is
// asked of the parent's answerer, naming the subagent; its answer lets the
// call run.
func TestChildAskGoesToParentsAnswerer(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		child:  []scripted.Reply{tool("risky"), text("risky done")},
	})
	ran := 0
	err := e.tools.Register(e.root, tools.Tool{Name: "risky", Approval: tools.Ask, Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
		ran++
		return tools.Result{Content: "ok"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "main", Options: agents.Options{Provider: "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(stdctx.Background())
	ap, _ := approval.Key.Get(e.root)
	asked := make(chan approval.Request, 1)
	detach, err := ap.Attach(s.AgentID(), func(_ stdctx.Context, req approval.Request) (approval.Answer, error) {
		asked <- req
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1", Content: "go"}); err != nil {
		t.Fatal(err)
	}
	e.idle(s)
	req := <-asked
	if req.AgentID != s.AgentID() || req.Tool != "risky" || !strings.Contains(req.Reason, `subagent "alpha"`) {
		t.Fatalf("the parent's answerer was asked %+v", req)
	}
	if r := e.results(s)["call_1"]; r.IsError || r.Content != "risky done" || ran != 1 {
		t.Fatalf("the call's result: %+v (ran %d)", r, ran)
	}
}

// TestChildAskWithoutParentAnswererFailsClosed: nobody answers for the
// parent, so the child's call is refused and the child carries on.
func TestChildAskWithoutParentAnswererFailsClosed(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		child:  []scripted.Reply{tool("risky"), text("carried on")},
	})
	err := e.tools.Register(e.root, tools.Tool{Name: "risky", Approval: tools.Ask, Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
		t.Error("the risky call ran without approval")
		return tools.Result{}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.parent("go")
	e.idle(p)
	if r := e.results(p)["call_1"]; r.IsError || r.Content != "carried on" {
		t.Fatalf("the call's result: %+v", r)
	}
}

// TestDepthLimitAndPersistedLink: a child that calls the agent tool again
// is refused at max_depth 1; its session is persisted under an id derived
// from the parent's.
func TestDepthLimitAndPersistedLink(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		child:  []scripted.Reply{calls("beta"), text("did it myself")},
		dir:    dir,
	})
	p := e.parent("nest")
	e.idle(p)
	if r := e.results(p)["call_1"]; r.IsError || r.Content != "did it myself" {
		t.Fatalf("the call's result: %+v", r)
	}
	files, _ := filepath.Glob(filepath.Join(dir, p.ID()+".sub-call_1-*.jsonl"))
	if len(files) != 1 {
		t.Fatalf("child session files: %v", files)
	}
	id := strings.TrimSuffix(filepath.Base(files[0]), ".jsonl")
	if parent, ok := session.ParentOf(id); !ok || parent != p.ID() {
		t.Fatalf("ParentOf(%q) = %q, %v", id, parent, ok)
	}
	log, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), string(subagent.DepthExceeded)) {
		t.Fatalf("the child's log does not show the depth refusal:\n%s", log)
	}
	e.onlyParentLeft(p)
}

// TestANestedCallDoesNotWaitForItsParentsSlot: with one slot and depth 2,
// the child's own call runs inside its parent's slot instead of waiting
// for it until the timeout.
func TestANestedCallDoesNotWaitForItsParentsSlot(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		// The scripted child answers by step: the child calls beta, the
		// grandchild tries too and is refused at depth 3, then both answer.
		child: []scripted.Reply{calls("beta"), text("answered")},
		tool:  subagent.Config{MaxConcurrent: 1, MaxDepth: 2, Timeout: 5 * time.Second},
	})
	p := e.parent("nest twice")
	e.idle(p)
	if r := e.results(p)["call_1"]; r.IsError || r.Content != "answered" {
		t.Fatalf("the call's result: %+v", r)
	}
}

func TestUnknownAgentAndConfig(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("gamma"), text("parent done")},
	})
	p := e.parent("go")
	e.idle(p)
	// The schema's enum refuses an unknown name before the tool runs.
	if r := e.results(p)["call_1"]; !r.IsError || !strings.Contains(r.Content, `must be one of ["alpha","beta"]`) {
		t.Fatalf("the call's result: %+v", r)
	}
	// The description lists the subagents for the model.
	spec := e.tools.Lookup(e.root, "agent")
	if spec == nil || !strings.Contains(spec.Description, "- alpha: does alpha things") || !spec.ParallelSafe {
		t.Fatalf("tool: %+v", spec)
	}
	for _, bad := range []subagent.Config{
		{Name: "agent", MaxConcurrent: 0, MaxDepth: 1, Timeout: time.Second},
		{Name: "agent", MaxConcurrent: 1, MaxDepth: 0, Timeout: time.Second},
		{Name: "agent", MaxConcurrent: 1, MaxDepth: 1, Timeout: 10},
		{Name: "a b", MaxConcurrent: 1, MaxDepth: 1, Timeout: time.Second},
		{Name: "agent", MaxConcurrent: 1, MaxDepth: 1, Timeout: time.Second, Agents: []subagent.Agent{{Name: ""}}},
		{Name: "agent", MaxConcurrent: 1, MaxDepth: 1, Timeout: time.Second, Agents: []subagent.Agent{{Name: "x", Provider: "p"}, {Name: "x", Provider: "p"}}},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v passed Validate", bad)
		}
	}
	// Neither template nor provider: the child inherits the caller's.
	inherits := subagent.Config{Name: "agent", MaxConcurrent: 1, MaxDepth: 1, Timeout: time.Second, Agents: []subagent.Agent{{Name: "x", SystemPrompt: "You review."}}}
	if err := inherits.Validate(); err != nil {
		t.Errorf("a subagent inheriting its caller's provider was refused: %v", err)
	}
}

// TestShutdownMidChild: disposing the whole tree while a child works
// closes parent and child without hanging or leaking (goleak).
func TestShutdownMidChild(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha", "beta"), text("parent done")},
		child:  []scripted.Reply{tool("block"), text("never")},
	})
	entered := make(chan struct{}, 2)
	err := e.tools.Register(e.root, tools.Tool{Name: "block", ParallelSafe: true, Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	e.parent("start")
	for range 2 {
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("the children never ran their tool")
		}
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := e.root.Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.reg.List()); n != 0 {
		t.Fatalf("%d agents left after dispose", n)
	}
}

// TestUnattendedParentMakesUnattendedChildren: a parent turn from a
// webhook gives its child an unattended task, so the child's call that
// needs approval is refused at once, without asking the parent's answerer.
func TestUnattendedParentMakesUnattendedChildren(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		child:  []scripted.Reply{tool("risky"), text("carried on")},
	})
	err := e.tools.Register(e.root, tools.Tool{Name: "risky", Approval: tools.Ask, Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
		t.Error("the risky call ran without approval")
		return tools.Result{}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var childSource agentcontroller.Source
	_, err = agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Source.Kind == agentcontroller.SourceSubagent {
			mu.Lock()
			childSource = a.Source
			mu.Unlock()
		}
		return next.Call(ctx, a)
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "main", Options: agents.Options{Provider: "parent"},
		Source: agentcontroller.Source{Kind: agentcontroller.SourceWebhook}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(stdctx.Background())
	ap, _ := approval.Key.Get(e.root)
	detach, err := ap.Attach(s.AgentID(), func(_ stdctx.Context, req approval.Request) (approval.Answer, error) {
		t.Errorf("the parent's answerer was asked %+v", req)
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1", Content: "go"}); err != nil {
		t.Fatal(err)
	}
	e.idle(s)
	if r := e.results(s)["call_1"]; r.IsError || r.Content != "carried on" {
		t.Fatalf("the call's result: %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if !childSource.IsUnattended() {
		t.Fatalf("the child's task came from %+v, want unattended", childSource)
	}
}

// TestCancelWhileWaitingForASlot: a call waiting for a slot (max_concurrent
// 1, the slot held by its sibling) is answered cancelled too.
func TestCancelWhileWaitingForASlot(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha", "beta"), text("parent done")},
		child:  []scripted.Reply{tool("block"), text("never")},
		tool:   subagent.Config{MaxConcurrent: 1},
	})
	entered := make(chan struct{}, 2)
	err := e.tools.Register(e.root, tools.Tool{Name: "block", ParallelSafe: true, Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
		entered <- struct{}{}
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}})
	if err != nil {
		t.Fatal(err)
	}
	p := e.parent("start")
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no child ran its tool")
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := p.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	e.idle(p)
	res := e.results(p)
	if len(res) != 2 {
		t.Fatalf("results: %+v", res)
	}
	// The waiting call's answer depends on which the cancel reached
	// first: the child waiting for its slot ("cancelled") or the parent's
	// step, which then answers for the calls it never ran ("not
	// executed"). Either way it is an error and the child never runs.
	for id, r := range res {
		if !r.IsError || !strings.Contains(r.Content, "cancelled") && !strings.HasPrefix(r.Content, "not executed") {
			t.Fatalf("%s: %+v", id, r)
		}
	}
	if len(entered) != 0 {
		t.Fatal("the second child ran after the cancel")
	}
	e.onlyParentLeft(p)
}

// TestChildFailureIsAnErrorResult: a child whose model fails answers the
// call with SUBAGENT_FAILED naming the error; one cut at its output limit
// answers with what it wrote and says so.
func TestChildFailureIsAnErrorResult(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		child:  []scripted.Reply{{Finish: "error", Error: "the model is down"}},
	})
	p := e.parent("go")
	e.idle(p)
	if r := e.results(p)["call_1"]; !r.IsError || !strings.HasPrefix(r.Content, string(subagent.Failed)) || !strings.Contains(r.Content, "the model is down") {
		t.Fatalf("the call's result: %+v", r)
	}

	e = newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		child:  []scripted.Reply{{Text: "half an", Finish: "max-tokens"}},
	})
	p = e.parent("go")
	e.idle(p)
	if r := e.results(p)["call_1"]; r.IsError || !strings.HasPrefix(r.Content, "half an") || !strings.Contains(r.Content, "output limit") {
		t.Fatalf("the call's result: %+v", r)
	}
}

// TestChildActsOnBehalfOfTheParentsPerson: a child's task comes from its
// parent agent on behalf of the person behind the parent's turn, with
// their tenant, and the child's own tool calls carry that provenance to
// the approval stage.
func TestChildActsOnBehalfOfTheParentsPerson(t *testing.T) {
	e := newEnv(t, setup{
		parent: []scripted.Reply{calls("alpha"), text("parent done")},
		child:  []scripted.Reply{tool("who"), text("noted")},
	})
	var mu sync.Mutex
	var childSource agentcontroller.Source
	var callSources []llm.Provenance
	err := e.tools.Register(e.root, tools.Tool{Name: "who", Execute: func(_ stdctx.Context, c tools.Call) (tools.Result, error) {
		mu.Lock()
		callSources = c.Sources
		mu.Unlock()
		return tools.Result{Content: "ok"}, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Source.Kind == agentcontroller.SourceSubagent {
			mu.Lock()
			childSource = a.Source
			mu.Unlock()
		}
		return next.Call(ctx, a)
	})
	if err != nil {
		t.Fatal(err)
	}
	alice := agentcontroller.Principal{Kind: "token", ID: "alice", Tenant: "acme"}
	s, err := e.ctl.Open(stdctx.Background(), sessions.OpenOptions{Agent: "main", Options: agents.Options{Provider: "parent"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(stdctx.Background())
	if _, err := s.Prompt(stdctx.Background(), sessions.PromptRequest{RequestID: "r1", Content: "go",
		Source: agentcontroller.Source{Kind: agentcontroller.SourceUser, Entry: "serve", Principal: alice}}); err != nil {
		t.Fatal(err)
	}
	idle(t, e.ctl, s.ID())
	mu.Lock()
	defer mu.Unlock()
	want := agentcontroller.Principal{Kind: "agent", ID: s.AgentID(), Tenant: "acme"}
	if childSource.Entry != "subagent" || childSource.Principal != want || childSource.OnBehalfOf == nil || *childSource.OnBehalfOf != alice {
		t.Fatalf("the child's task came from %+v (on behalf of %v)", childSource, childSource.OnBehalfOf)
	}
	if len(callSources) != 1 || callSources[0].Principal != want || callSources[0].OnBehalfOf == nil || *callSources[0].OnBehalfOf != alice {
		t.Fatalf("the child's call carried %+v", callSources)
	}
}
