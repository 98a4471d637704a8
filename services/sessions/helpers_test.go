package sessions_test

import (
	"bufio"
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/plugins/session/jsonl"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type env struct {
	t        testing.TB
	root     *dshctx.Context
	registry *agents.Registry
	store    *session.Store
	tools    *tools.Service
	ctl      *sessions.Controller
	fiber    *dshctx.Fiber // the session controller's
	dir      string        // the session.jsonl directory, "" without persistence
}

type setup struct {
	dir     string // mount session.jsonl on it
	replies []scripted.Reply
	opts    sessions.Options
	// opener wraps the default RegistryOpener, when set.
	opener func(reg *agents.Registry) sessions.Opener
}

// newEnv mounts the core services, a scripted model (echo by default),
// optionally session.jsonl, the agent loop, the agent controller and the
// session controller.
func newEnv(t testing.TB, s setup) *env {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	apply := func(p dshctx.Plugin, cfg any) *dshctx.Fiber {
		t.Helper()
		f, err := root.Plugin(p, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.Await(stdctx.Background()); err != nil {
			t.Fatal(err)
		}
		return f
	}
	apply(scripted.Plugin, scripted.Config{Replies: s.replies})
	if s.dir != "" {
		apply(jsonl.Plugin, &jsonl.Config{Dir: s.dir})
	}
	apply(agentloop.Plugin, agentloop.Config{})
	apply(agentcontroller.Plugin, nil)
	reg, _ := agents.Key.Get(root)
	if s.opener != nil {
		s.opts.Opener = s.opener(reg)
	}
	f := apply(sessions.Plugin, s.opts)
	ctl, _ := sessions.Key.Get(root)
	store, _ := session.Key.Get(root)
	ts, _ := tools.Key.Get(root)
	return &env{t: t, root: root, registry: reg, store: store, tools: ts, ctl: ctl, fiber: f, dir: s.dir}
}

func (e *env) open(o sessions.OpenOptions) *sessions.Session {
	e.t.Helper()
	if o.Agent == "" {
		o.Agent = "coder"
	}
	o.Options.Provider = "scripted"
	s, err := e.ctl.Open(stdctx.Background(), o)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}

// idle waits, through the service as entry points do, until session s
// of e has nothing left to do.
func (e *env) idle(s *sessions.Session) {
	e.t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := e.ctl.Idle(ctx, s.ID()); err != nil {
		e.t.Fatalf("session %s never went idle: %v", s.ID(), err)
	}
}

// events returns the log of session s of e, through the service.
func (e *env) events(s *sessions.Session) []session.Event {
	e.t.Helper()
	evs, err := e.ctl.History(stdctx.Background(), s.ID(), 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// agent returns the live agent of session s, from the agents registry:
// for the tests that look at what the session hides (its scope, the
// history it sends the model).
func (e *env) agent(s *sessions.Session) agents.Agent {
	e.t.Helper()
	a, ok := e.registry.Get(s.AgentID())
	if !ok {
		e.t.Fatalf("no agent %s runs for session %s", s.AgentID(), s.ID())
	}
	return a
}

// userMessages counts the prompts among a session's events.
func userMessages(evs []session.Event) int {
	n := 0
	for _, e := range evs {
		if e.Type == session.UserMessage {
			n++
		}
	}
	return n
}

// persisted reads the event types of a session file.
func (e *env) persisted(id string) []session.Event {
	e.t.Helper()
	f, err := os.Open(filepath.Join(e.dir, id+".jsonl"))
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	var out []session.Event
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var ev session.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			e.t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

// gate is a tool that blocks until its call is cancelled.
type gate struct{ entered chan struct{} }

func (e *env) gateTool(name string) *gate {
	e.t.Helper()
	g := &gate{entered: make(chan struct{}, 16)}
	err := e.tools.Register(e.root, tools.Tool{Name: name, Description: "blocks", Execute: func(ctx stdctx.Context, _ tools.Call) (tools.Result, error) {
		g.entered <- struct{}{}
		<-ctx.Done()
		return tools.Result{}, ctx.Err()
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	return g
}

func (g *gate) wait(t testing.TB) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the gated tool was never called")
	}
}

func wait[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting")
		var zero T
		return zero
	}
}
