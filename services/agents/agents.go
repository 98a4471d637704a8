// Package agents is the agents service: the registry of live agents, the
// Agent interface every part of dsh talks to, the Handle that owns one
// agent's life, and the factory seam through which the agent loop creates
// and resumes agents.
//
// The events of this package — agent/created, agent/disposed, agent/status
// and agent/error — are dispatched in the agent's scope, so a listener
// registered there hears only its agent.
package agents

import (
	stdctx "context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
)

// Codes of the agents service.
const (
	// AgentExists: an agent id is taken.
	AgentExists errs.Code = "AGENT_EXISTS"
	// AgentNotFound: no live agent has the id.
	AgentNotFound errs.Code = "AGENT_NOT_FOUND"
	// AgentDisposed: the agent was disposed and accepts nothing more.
	AgentDisposed errs.Code = "AGENT_DISPOSED"
	// NoFactory: nothing that can create agents is loaded.
	NoFactory errs.Code = "AGENT_NO_FACTORY"
	// FactoryExists: a second factory tried to register.
	FactoryExists errs.Code = "AGENT_FACTORY_EXISTS"
	// DisposeTimeout: a dispose deadline passed before the agent's turn
	// stopped. The agent's id and session stay taken until it does.
	DisposeTimeout errs.Code = "AGENT_DISPOSE_TIMEOUT"
)

// ReasonStopping goes with AgentExists when the id belongs to an agent whose
// dispose timed out and whose turn has not stopped yet.
const ReasonStopping = "agents/stopping"

// Status is an agent's coarse state.
type Status string

// Agent statuses.
const (
	StatusIdle     Status = "idle"
	StatusRunning  Status = "running"
	StatusDisposed Status = "disposed"
)

// Agent is a live agent.
type Agent interface {
	ID() string
	Status() Status
	Session() *session.Session
	// Context is the agent's scope: what is registered through it hears
	// only this agent.
	Context() *dshctx.Context
	// Followup queues msg for a later turn.
	Followup(msg llm.Message) error
	// Steer hands msg to the running turn before its next step.
	Steer(msg llm.Message) error
	// Abort stops the step in flight: the model stream or tool call.
	Abort()
	// Cancel drops what is queued and steering, aborts the step in flight
	// and ends the current turn, or drops the one about to start. The
	// cause's "by" detail names who cancelled (see CancelledBy).
	Cancel(cause error)
	// WhenIdle returns once the agent has nothing left to do, or ctx ends.
	WhenIdle(ctx stdctx.Context) error
	// Pending returns how many messages wait in the inbox.
	Pending() int
}

// Handle owns one agent: disposing it stops the agent's loop, waits until it
// is quiet, writes its session a last time, unregisters it, releases its
// session and disposes its scope.
type Handle struct {
	Agent   Agent
	done    atomic.Bool
	dispose func(stdctx.Context) error
}

// NewHandle is for factories: it ties dispose to agent.
func NewHandle(agent Agent, dispose func(stdctx.Context) error) *Handle {
	return &Handle{Agent: agent, dispose: dispose}
}

// Dispose tears the agent down, bounded by ctx, and returns what kept it
// from finishing: the deadline passed while a turn was still running
// (DisposeTimeout), or the final write of the session failed (the session's
// FlushFailed; its events stay in memory). Until a call succeeds the agent's
// id and session stay taken, and calling Dispose again waits and retries;
// once one succeeded, later calls return nil.
func (h *Handle) Dispose(ctx stdctx.Context) error {
	if h.done.Load() {
		return nil
	}
	if err := h.dispose(ctx); err != nil {
		return err
	}
	h.done.Store(true)
	return nil
}

// Options configure an agent's model use.
type Options struct {
	Provider     string `koanf:"provider" json:"provider,omitempty"`
	Model        string `koanf:"model" json:"model,omitempty"`
	SystemPrompt string `koanf:"system_prompt" json:"system_prompt,omitempty"`
	MaxTokens    int    `koanf:"max_tokens" json:"max_tokens,omitempty"`
	// MaxSteps bounds the steps of one turn; 0 means the loop's default.
	MaxSteps int `koanf:"max_steps" json:"max_steps,omitempty"`
	// Workspace is the directory the agent's tools work in, as an absolute
	// path: file tools resolve every path inside it and bash runs there.
	// Empty means the directory dsh was started in.
	Workspace string `koanf:"workspace" json:"workspace,omitempty"`
	// MaxParallelTools caps how many parallel-safe tool calls of one step
	// run at once; 0 means the loop's default.
	MaxParallelTools int `koanf:"max_parallel_tools" json:"max_parallel_tools,omitempty"`
	// Limits bound each model response of the agent: its text, reasoning,
	// tool-call arguments, and its tool and subagent calls per step
	// (zero fields: llm's defaults).
	Limits llm.Limits `koanf:"limits" json:"limits,omitempty"`
}

// CreateOptions describe a new agent.
type CreateOptions struct {
	AgentID   string
	SessionID string
	Meta      map[string]string
	Options   Options
	// Setup runs in the agent's scope before the agent is published; an
	// error leaves nothing behind and frees the id.
	Setup func(agentCtx *dshctx.Context) error
}

// ResumeOptions describe an agent continuing a persisted session.
type ResumeOptions struct {
	AgentID         string
	ResumeSessionID string
	Options         Options
	Setup           func(agentCtx *dshctx.Context) error
}

// Factory creates agents; the agent loop is the one factory.
type Factory interface {
	Create(ctx stdctx.Context, opts CreateOptions) (*Handle, error)
	Resume(ctx stdctx.Context, opts ResumeOptions) (*Handle, error)
}

// StatusChange is the payload of agent/status.
type StatusChange struct {
	Agent    Agent
	From, To Status
}

// ErrorReport is the payload of agent/error.
type ErrorReport struct {
	Agent Agent
	Err   error
}

// Events of the agents service.
var (
	EventCreated  = waterfall.NewEmit[Agent]("agent/created")
	EventDisposed = waterfall.NewEmit[Agent]("agent/disposed")
	EventStatus   = waterfall.NewEmit[StatusChange]("agent/status")
	EventError    = waterfall.NewEmit[ErrorReport]("agent/error")
)

// Key is the service key.
var Key = dshctx.NewKey[*Registry]("agents")

// Plugin provides the service.
var Plugin = dshctx.Define("agents", func(ctx *dshctx.Context, _ dshctx.None) error {
	return Key.Provide(ctx, NewRegistry())
})

// Registry is the agents service.
type Registry struct {
	mu       sync.RWMutex
	agents   map[string]Agent
	reserved map[string]bool
	// stopping holds the ids of agents whose dispose timed out, until their
	// turn stops.
	stopping map[string]Agent
	factory  Factory
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{agents: map[string]Agent{}, reserved: map[string]bool{}, stopping: map[string]Agent{}}
}

// Get returns the live agent with id.
func (r *Registry) Get(id string) (Agent, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.agents[id]
	return a, ok
}

// Has reports whether id is a live agent and that agent is a.
func (r *Registry) Has(a Agent) bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return a != nil && r.agents[a.ID()] == a
}

// List returns the live agents sorted by id.
func (r *Registry) List() []Agent {
	r.mu.RLock()
	out := make([]Agent, 0, len(r.agents))
	for _, a := range r.agents {
		out = append(out, a)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

// SetFactory installs f for as long as ctx's fiber lives.
func (r *Registry) SetFactory(ctx *dshctx.Context, f Factory) error {
	_, err := ctx.Effect("agent factory", func() (dshctx.Disposer, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.factory != nil {
			return nil, errs.New(FactoryExists, "an agent factory is already registered; load only one agent loop plugin")
		}
		r.factory = f
		return func() error {
			r.mu.Lock()
			if r.factory == f {
				r.factory = nil
			}
			r.mu.Unlock()
			return nil
		}, nil
	})
	return err
}

func (r *Registry) getFactory() (Factory, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if r.factory == nil {
		return nil, errs.New(NoFactory, "no agent factory is loaded: apply the agent loop plugin (agentloop.Plugin) before creating agents")
	}
	return r.factory, nil
}

// Create makes an agent through the factory.
func (r *Registry) Create(ctx stdctx.Context, opts CreateOptions) (*Handle, error) {
	f, err := r.getFactory()
	if err != nil {
		return nil, err
	}
	return f.Create(ctx, opts)
}

// Resume continues a persisted session through the factory.
func (r *Registry) Resume(ctx stdctx.Context, opts ResumeOptions) (*Handle, error) {
	f, err := r.getFactory()
	if err != nil {
		return nil, err
	}
	return f.Resume(ctx, opts)
}

// Reserve claims id for an agent being built; factories call it first.
func (r *Registry) Reserve(id string) error {
	if id == "" {
		return errs.New(errs.InvalidArgument, "agents: the agent id is empty")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, stopping := r.stopping[id]; stopping {
		return errs.New(AgentExists, fmt.Sprintf(
			"agent %q is still stopping: a dispose deadline passed while its turn ran, and the id is free once that turn stops; retry then", id)).WithReason(ReasonStopping)
	}
	if _, live := r.agents[id]; live || r.reserved[id] {
		return errs.New(AgentExists, fmt.Sprintf("agent %q already exists; dispose it first or pick another id", id))
	}
	r.reserved[id] = true
	return nil
}

// Release frees a reservation that did not become an agent.
func (r *Registry) Release(id string) {
	r.mu.Lock()
	delete(r.reserved, id)
	r.mu.Unlock()
}

// Publish turns a reservation into a live agent.
func (r *Registry) Publish(a Agent) {
	r.mu.Lock()
	delete(r.reserved, a.ID())
	r.agents[a.ID()] = a
	r.mu.Unlock()
}

// Unregister removes a live or stopping agent and frees its id.
func (r *Registry) Unregister(a Agent) {
	r.mu.Lock()
	if r.agents[a.ID()] == a {
		delete(r.agents, a.ID())
	}
	if r.stopping[a.ID()] == a {
		delete(r.stopping, a.ID())
	}
	r.mu.Unlock()
}

// Retire takes a live agent out of the registry but keeps its id taken: for
// an agent that was disposed and whose turn has not stopped yet.
func (r *Registry) Retire(a Agent) {
	r.mu.Lock()
	if r.agents[a.ID()] == a {
		delete(r.agents, a.ID())
		r.stopping[a.ID()] = a
	}
	r.mu.Unlock()
}
