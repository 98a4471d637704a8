// Package agentloop is the agentLoop service: ReactLoopAgent, its inbox and
// the turn/step driver, and the factory the agents service creates agents
// through.
//
// A turn takes every message queued when it starts (lines typed while the
// agent worked become one turn, each recorded as its own user/message; a
// message queued after the turn started waits for the next one), makes
// them durable through session/flush, and runs steps until the model is
// done: each step drains steering, assembles the system prompt, passes the
// request through agent/request, streams the model (each chunk to
// agent/stream-chunk, the assembled message into the session), passes the
// result through agent/step-result, runs the tool calls through
// tools/execute — consecutive parallel-safe calls together, up to
// max_parallel_tools at once, any other call alone, results recorded in
// the model's order (see tools.Service.Run) — and asks
// agent/turn-continuation whether to go on. A
// failing or panicking plugin, model or tool ends the turn with reason
// "error"; an Abort ends it "aborted" and the model is not called again,
// even when the step it cancelled finishes anyway. The agent keeps serving
// its next message.
package agentloop

import (
	stdctx "context"
	"fmt"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/services/usage"
	"github.com/google/uuid"
)

// Key is the service key of the agent loop.
var Key = dshctx.NewKey[*Loop]("agentLoop")

// DefaultMaxSteps bounds a turn when neither the loop nor the agent says.
const DefaultMaxSteps = 64

// Config is the plugin's configuration.
type Config struct {
	// Agents start with the loop, each on a fresh session, and are disposed
	// with it.
	Agents []AgentConfig `koanf:"agents" json:"agents,omitempty"`
	// MaxSteps bounds the steps of one turn (default DefaultMaxSteps).
	MaxSteps int `koanf:"max_steps" json:"max_steps,omitempty"`
	// MaxParallelTools caps the parallel-safe tool calls of one step
	// running at once, for agents whose options set no cap of their own
	// (default DefaultMaxParallelTools).
	MaxParallelTools int `koanf:"max_parallel_tools" json:"max_parallel_tools,omitempty"`
	// Pricing prices each model request's tokens for the dsh.cost
	// metric (the host's pricing: block); a model it does not list is
	// counted in dsh.tokens only.
	Pricing usage.Pricing `koanf:"-" json:"-"`
	// DefaultModel (may be nil) names the model a provider answers a
	// request that names none with, so its cost is priced too.
	DefaultModel func(provider string) string `koanf:"-" json:"-"`
}

// AgentConfig is one configured agent.
type AgentConfig struct {
	ID             string `koanf:"id" json:"id"`
	agents.Options `koanf:",squash"`
}

// Loop is the agent loop service and the agents factory.
type Loop struct {
	ctx      *dshctx.Context
	cfg      Config
	registry *agents.Registry
	sessions *session.Store
	llm      *llm.Service
	tools    *tools.Service
	prompt   *systemprompt.Service
}

// Plugin is the agent loop. It injects the five services it drives, provides
// agentLoop and registers itself as the agents factory. Its config is a
// Config, a *Config or nil.
var Plugin = dshctx.Define("agentLoop", apply,
	agents.Key, session.Key, llm.Key, tools.Key, systemprompt.Key)

func apply(ctx *dshctx.Context, cfg Config) error {
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = DefaultMaxSteps
	}
	if cfg.MaxParallelTools <= 0 {
		cfg.MaxParallelTools = DefaultMaxParallelTools
	}
	l := &Loop{ctx: ctx, cfg: cfg}
	var err error
	if l.registry, err = agents.Key.Get(ctx); err != nil {
		return err
	}
	if l.sessions, err = session.Key.Get(ctx); err != nil {
		return err
	}
	if l.llm, err = llm.Key.Get(ctx); err != nil {
		return err
	}
	if l.tools, err = tools.Key.Get(ctx); err != nil {
		return err
	}
	if l.prompt, err = systemprompt.Key.Get(ctx); err != nil {
		return err
	}
	if _, err := session.EventDecision.On(ctx, l.onDecision); err != nil {
		return err
	}
	if _, err := session.EventRecord.On(ctx, l.onRecord); err != nil {
		return err
	}
	if err := Key.Provide(ctx, l); err != nil {
		return err
	}
	if err := l.registry.SetFactory(ctx, l); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i, ac := range cfg.Agents {
		if ac.ID == "" {
			return errs.New(errs.InvalidArgument, fmt.Sprintf("agentLoop: agents[%d] has no id", i))
		}
		if seen[ac.ID] {
			return errs.New(agents.AgentExists, fmt.Sprintf("agentLoop: agents[%d] repeats the id %q", i, ac.ID))
		}
		seen[ac.ID] = true
		if _, err := l.Create(ctx, agents.CreateOptions{AgentID: ac.ID, Options: ac.Options}); err != nil {
			return err
		}
	}
	return nil
}

// Create makes and starts an agent; see agents.Registry.Create. An empty
// SessionID gets a fresh "<id>-session-<uuid>".
func (l *Loop) Create(ctx stdctx.Context, opts agents.CreateOptions) (*agents.Handle, error) {
	if opts.SessionID == "" {
		opts.SessionID = opts.AgentID + "-session-" + uuid.NewString()
	}
	return l.build(opts.AgentID, opts.Options, opts.Setup, func(scope *dshctx.Context) (*session.Session, error) {
		return l.sessions.Create(scope, opts.AgentID, opts.SessionID)
	})
}

// Resume makes an agent that continues a persisted session: the history and
// the turn count come from the loaded log. The session's lease is taken
// before the log is read; a log that ends inside a turn is closed as
// interrupted (see session.Store.Resume).
func (l *Loop) Resume(ctx stdctx.Context, opts agents.ResumeOptions) (*agents.Handle, error) {
	if opts.ResumeSessionID == "" {
		return nil, errs.New(errs.InvalidArgument, "agentLoop.Resume: ResumeSessionID is empty")
	}
	return l.build(opts.AgentID, opts.Options, opts.Setup, func(scope *dshctx.Context) (*session.Session, error) {
		return l.sessions.Resume(ctx, scope, opts.AgentID, opts.ResumeSessionID)
	})
}

// build reserves the id, makes the scope and session, runs setup and only
// then publishes the agent. Any failure undoes every step.
func (l *Loop) build(id string, opts agents.Options, setup func(*dshctx.Context) error,
	open func(*dshctx.Context) (*session.Session, error)) (h *agents.Handle, err error) {
	if strings.TrimSpace(id) == "" {
		return nil, errs.New(errs.InvalidArgument, "agents: the agent id is empty")
	}
	if err := l.registry.Reserve(id); err != nil {
		return nil, err
	}
	scope, err := l.ctx.Scoped(id)
	if err != nil {
		l.registry.Release(id)
		return nil, err
	}
	var sess *session.Session
	defer func() {
		if p := recover(); p != nil {
			err = errs.New(errs.PluginFailed, fmt.Sprintf("setting up agent %q panicked: %v", id, p))
		}
		if err != nil {
			if sess != nil {
				l.sessions.Close(sess)
			}
			// The build's own error is what the caller needs; what the
			// half-built scope's teardown hits is logged where it fails.
			_ = scope.Dispose(stdctx.Background())
			l.registry.Release(id)
			h = nil
		}
	}()
	if sess, err = open(scope); err != nil {
		return nil, err
	}
	a := &ReactLoopAgent{loop: l, id: id, scope: scope, sess: sess, opts: opts, status: agents.StatusIdle,
		finishing: make(chan struct{}, 1), pen: make(chan struct{}, 1)}
	if a.workspace, err = workspace(id, opts.Workspace); err != nil {
		return nil, err
	}
	var queued []session.Event
	for _, e := range sess.Events(1) {
		if e.Type == session.TurnStart {
			a.turn = e.Turn
		}
		if e.Type == session.MessageQueued {
			queued = append(queued, e)
		}
		if e.Message != nil {
			a.noteParts(*e.Message)
		}
	}
	if opts.SystemPrompt != "" {
		if err = l.prompt.Section(scope, "agent", 0, opts.SystemPrompt); err != nil {
			return nil, err
		}
	}
	if setup != nil {
		if err = setup(scope); err != nil {
			return nil, errs.Wrap(errs.PluginFailed, err, fmt.Sprintf("setting up agent %q failed", id))
		}
	}
	// The loop's fiber owns the agent: if the loop goes away, so does it.
	off, err := l.ctx.OnDisposeCtx("agent "+id, a.loopGone)
	if err != nil {
		return nil, err
	}
	l.registry.Publish(a)
	agents.EventCreated.Emit(stdctx.Background(), scope, a)
	a.requeue(queued)
	return agents.NewHandle(a, func(ctx stdctx.Context) error {
		if err := a.teardown(ctx); err != nil {
			return err
		}
		off() // runs loopGone, which finds the agent finished
		return nil
	}), nil
}
