package agentloop_test

import (
	stdctx "context"
	"fmt"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"strings"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

type env struct {
	t        testing.TB
	root     *dshctx.Context
	registry *agents.Registry
	tools    *tools.Service
	loop     *dshctx.Fiber
}

// newEnv mounts the core services, a scripted provider with replies and the
// agent loop with cfg.
func newEnv(t testing.TB, replies []scripted.Reply, cfg agentloop.Config) *env {
	t.Helper()
	return newEnvLogged(t, scripted.Config{Replies: replies}, cfg, hclog.NewNullLogger())
}

// newEnvLogged is newEnv with the scripted model's whole config and a
// logger of the test's.
func newEnvLogged(t testing.TB, model scripted.Config, cfg agentloop.Config, log hclog.Logger) *env {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(log))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	p, _ := root.Plugin(scripted.Plugin, model)
	if err := p.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	loop, _ := root.Plugin(agentloop.Plugin, cfg)
	if err := loop.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	reg, _ := agents.Key.Get(root)
	ts, _ := tools.Key.Get(root)
	return &env{t: t, root: root, registry: reg, tools: ts, loop: loop}
}

func (e *env) create(id string) *agents.Handle {
	e.t.Helper()
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: id, Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { h.Dispose(stdctx.Background()) })
	return h
}

// registerProvider adds a provider under name on the root.
func (e *env) registerProvider(name string, p llm.Provider) {
	e.t.Helper()
	svc, _ := llm.Key.Get(e.root)
	if err := svc.Register(e.root, name, p); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) tool(name string, run func(stdctx.Context, tools.Call) (tools.Result, error)) {
	e.t.Helper()
	if err := e.tools.Register(e.root, tools.Tool{Name: name, Description: "test tool", Execute: run}); err != nil {
		e.t.Fatal(err)
	}
}

func user(text string) llm.Message { return llm.Message{Role: llm.RoleUser, Content: text} }

func idle(t testing.TB, a agents.Agent) {
	t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatalf("agent %s never went idle: %v", a.ID(), err)
	}
}

// trace renders the session as "type" strings, with turn ends' reasons,
// tool names and user texts.
// trace names the events of s that tell the turn's story; decision
// records are left out (decisions_test.go checks where they go).
func trace(s *session.Session) []string {
	var out []string
	for _, e := range s.Events(1) {
		if e.Type == session.DecisionRecorded {
			continue
		}
		item := string(e.Type)
		switch e.Type {
		case session.TurnEnd:
			item += ":" + e.Reason
		case session.ToolCall:
			item += ":" + e.ToolCall.Name
		case session.UserMessage, session.SteeringMessage:
			item += ":" + e.Message.Content
		}
		out = append(out, item)
	}
	return out
}

func turnEnds(s *session.Session) []string {
	var out []string
	for _, e := range s.Events(1) {
		if e.Type == session.TurnEnd {
			out = append(out, e.Reason)
		}
	}
	return out
}

// gate is a tool that blocks until released or its call is cancelled.
type gate struct {
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 16), release: make(chan struct{})} }

func (g *gate) run(ctx stdctx.Context, c tools.Call) (tools.Result, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
		return tools.Result{Content: "released"}, nil
	case <-ctx.Done():
		return tools.Result{}, ctx.Err()
	}
}

func (g *gate) open() { g.once.Do(func() { close(g.release) }) }

func (g *gate) wait(t testing.TB) {
	t.Helper()
	select {
	case <-g.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the gated tool was never called")
	}
}

func join(xs []string) string { return strings.Join(xs, "\n") }

func assertTrace(t testing.TB, s *session.Session, want ...string) {
	t.Helper()
	if got := trace(s); join(got) != join(want) {
		t.Fatalf("session events\n got:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

var _ = fmt.Sprint
