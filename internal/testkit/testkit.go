// Package testkit holds what dsh's tests share: a quiet root with the core
// services and the agent controller mounted, and a Recorder agent whose
// inbox only records, for tests of delivery and admission that need no
// model.
package testkit

import (
	stdctx "context"
	"sync"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/core"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// Env is a root with the core services and the agent controller.
type Env struct {
	T          testing.TB
	Root       *dshctx.Context
	Registry   *agents.Registry
	Controller *agentcontroller.Controller
	// ControllerFiber is the controller's fiber, to dispose it in tests.
	ControllerFiber *dshctx.Fiber
}

// New mounts everything on a fresh quiet root disposed at cleanup.
func New(t testing.TB) *Env {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	if err := core.Mount(root); err != nil {
		t.Fatal(err)
	}
	f, err := root.Plugin(agentcontroller.Plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	reg, _ := agents.Key.Get(root)
	ctl, _ := agentcontroller.Key.Get(root)
	return &Env{T: t, Root: root, Registry: reg, Controller: ctl, ControllerFiber: f}
}

// Apply applies p with config on the root and fails the test if it fails.
func (e *Env) Apply(p dshctx.Plugin, config any) *dshctx.Fiber {
	e.T.Helper()
	f, err := e.Root.Plugin(p, config)
	if err != nil {
		e.T.Fatal(err)
	}
	if err := f.Await(stdctx.Background()); err != nil {
		e.T.Fatal(err)
	}
	return f
}

// Agent registers a Recorder with id.
func (e *Env) Agent(id string) *Recorder {
	e.T.Helper()
	scope, err := e.Root.Scoped(id)
	if err != nil {
		e.T.Fatal(err)
	}
	r := &Recorder{id: id, scope: scope}
	if err := e.Registry.Reserve(id); err != nil {
		e.T.Fatal(err)
	}
	e.Registry.Publish(r)
	return r
}

// Remove takes a Recorder out of the registry, as a dispose would.
func (e *Env) Remove(r *Recorder) {
	r.mu.Lock()
	r.gone = true
	r.mu.Unlock()
	e.Registry.Unregister(r)
}

// Send is a followup request from a user with text as content.
func Send(text string) agentcontroller.Request {
	return agentcontroller.Request{Mode: agentcontroller.Followup, Source: agentcontroller.Source{Kind: agentcontroller.SourceUser}, Content: text}
}

// Recorder is an agent whose inbox records messages and runs no turns.
type Recorder struct {
	id    string
	scope *dshctx.Context
	mu    sync.Mutex
	inbox []string
	modes []string
	gone  bool
}

var _ agents.Agent = (*Recorder)(nil)

func (r *Recorder) ID() string                    { return r.id }
func (r *Recorder) Status() agents.Status         { return agents.StatusIdle }
func (r *Recorder) Session() *session.Session     { return nil }
func (r *Recorder) Context() *dshctx.Context      { return r.scope }
func (r *Recorder) Abort()                        {}
func (r *Recorder) Cancel(error)                  {}
func (r *Recorder) WhenIdle(stdctx.Context) error { return nil }
func (r *Recorder) Followup(m llm.Message) error  { return r.add(m, "followup") }
func (r *Recorder) Steer(m llm.Message) error     { return r.add(m, "steer") }

// Pending returns how many messages were recorded and not taken.
func (r *Recorder) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.inbox)
}

// Messages returns the recorded contents in order.
func (r *Recorder) Messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.inbox...)
}

// Modes returns the recorded modes in order.
func (r *Recorder) Modes() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.modes...)
}

// Take empties the inbox, as a turn starting would.
func (r *Recorder) Take() {
	r.mu.Lock()
	r.inbox, r.modes = nil, nil
	r.mu.Unlock()
}

func (r *Recorder) add(m llm.Message, mode string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.gone {
		return errs.New(agents.AgentDisposed, "agent "+r.id+" is gone")
	}
	r.inbox = append(r.inbox, m.Content)
	r.modes = append(r.modes, mode)
	return nil
}
