package agentcontroller_test

import (
	stdctx "context"
	"errors"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// recorder is an agent whose inbox only records: no loop runs.
type recorder struct {
	id    string
	scope *dshctx.Context
	mu    sync.Mutex
	inbox []string
	modes []string
	gone  bool
}

func (r *recorder) ID() string                    { return r.id }
func (r *recorder) Status() agents.Status         { return agents.StatusIdle }
func (r *recorder) Session() *session.Session     { return nil }
func (r *recorder) Context() *dshctx.Context      { return r.scope }
func (r *recorder) Abort()                        {}
func (r *recorder) Cancel(error)                  {}
func (r *recorder) WhenIdle(stdctx.Context) error { return nil }
func (r *recorder) Followup(m llm.Message) error  { return r.add(m, "followup") }
func (r *recorder) Steer(m llm.Message) error     { return r.add(m, "steer") }
func (r *recorder) Pending() int                  { r.mu.Lock(); defer r.mu.Unlock(); return len(r.inbox) }
func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.inbox...)
}
func (r *recorder) add(m llm.Message, mode string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return errs.New(agents.AgentDisposed, "gone")
	}
	r.inbox = append(r.inbox, m.Content)
	r.modes = append(r.modes, mode)
	return nil
}

type env struct {
	t     testing.TB
	root  *dshctx.Context
	reg   *agents.Registry
	ctl   *agentcontroller.Controller
	fiber *dshctx.Fiber
}

func newEnv(t testing.TB) *env {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	t.Cleanup(root.Dispose)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	f, _ := root.Plugin(agentcontroller.Plugin, nil)
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	reg, _ := agents.Key.Get(root)
	ctl, _ := agentcontroller.Key.Get(root)
	return &env{t: t, root: root, reg: reg, ctl: ctl, fiber: f}
}

func (e *env) agent(id string) *recorder {
	e.t.Helper()
	scope, err := e.root.Scoped(id)
	if err != nil {
		e.t.Fatal(err)
	}
	r := &recorder{id: id, scope: scope}
	if err := e.reg.Reserve(id); err != nil {
		e.t.Fatal(err)
	}
	e.reg.Publish(r)
	return r
}

func (e *env) remove(r *recorder) {
	r.mu.Lock()
	r.gone = true
	r.mu.Unlock()
	e.reg.Unregister(r)
}

func send(text string) agentcontroller.Request {
	return agentcontroller.Request{Mode: agentcontroller.Followup, Source: agentcontroller.Source{Kind: agentcontroller.SourceUser}, Content: text}
}

type result struct {
	id  string
	err error
}

// deliverAsync starts a delivery and returns a channel with its outcome.
func (e *env) deliverAsync(ctx stdctx.Context, a agents.Agent, req agentcontroller.Request) chan result {
	ch := make(chan result, 1)
	go func() {
		id, err := e.ctl.Deliver(ctx, a, req)
		ch <- result{id, err}
	}()
	return ch
}

func wait(t testing.TB, ch chan result) result {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("delivery never settled")
		return result{}
	}
}

// holdGate is an admission listener that holds messages whose content is
// "hold" until released, reporting when it started holding.
type holdGate struct {
	holding chan string
	release chan struct{}
}

func newHoldGate() *holdGate {
	return &holdGate{holding: make(chan string, 16), release: make(chan struct{})}
}

func (g *holdGate) waitHolding(t testing.TB) {
	t.Helper()
	select {
	case <-g.holding:
	case <-time.After(10 * time.Second):
		t.Fatal("the listener never held")
	}
}

var errNotHeld = errors.New("not held")
