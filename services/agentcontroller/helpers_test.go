package agentcontroller_test

import (
	stdctx "context"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
)

type recorder = testkit.Recorder

type env struct {
	*testkit.Env
	root  *dshctx.Context
	reg   *agents.Registry
	ctl   *agentcontroller.Controller
	fiber *dshctx.Fiber
}

func newEnv(t testing.TB) *env {
	k := testkit.New(t)
	return &env{Env: k, root: k.Root, reg: k.Registry, ctl: k.Controller, fiber: k.ControllerFiber}
}

func (e *env) agent(id string) *recorder { return e.Agent(id) }

func (e *env) remove(r *recorder) { e.Remove(r) }

var send = testkit.Send

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
