package host

import (
	stdctx "context"
	"errors"
	"fmt"
	"slices"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agents"
)

// The one way an agent is made with its presets: OpenAgent, the session
// controller's opener, goes through openPlan.

// sessionMode says how an agent gets its session.
type sessionMode int

const (
	// freshSession: a new session, under plan.session when set.
	freshSession sessionMode = iota
	// resumeOnly: resume plan.session; not persisted is an error.
	resumeOnly
)

// plan is one agent to open.
type plan struct {
	id      string
	options agents.Options
	presets []string
	entries [][]config.Entry // presets resolved, in order
	session string
	mode    sessionMode
	// noProvider builds the error of a provider nothing registers for
	// the agent's scope; names are those registered.
	noProvider func(names []string) error
	// extra are AgentSpec.Entries, mounted after the presets.
	extra []extraEntry
	// setup, when set, runs in the scope after the presets.
	setup func(scope *dshctx.Context) error
}

// extraEntry is an entry an opener adds for one agent, decoded already.
type extraEntry struct {
	entry  config.Entry
	config any
	at     string
}

// applyExtra mounts an extra entry in scope; it goes with the scope.
func (h *Host) applyExtra(scope *dshctx.Context, x extraEntry) error {
	info, ok := plugin.Lookup(x.entry.Use)
	if !ok {
		return errs.New(StartFailed, fmt.Sprintf("%s: plugin %q is not registered", x.at, x.entry.Use))
	}
	f, err := scope.Plugin(info.Plugin, x.config)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		if f != nil {
			err = errors.Join(err, f.Dispose(stdctx.Background()))
		}
		return errs.Wrap(StartFailed, err, fmt.Sprintf("%s (use %s) failed to start", x.at, x.entry.Use))
	}
	return nil
}

// openPlan creates or resumes the agent of p with cfg's presets mounted in
// its scope, then checks its provider is registered there. Any failure
// leaves nothing behind: the agents factory disposes the half-built scope
// (and the presets mounted in it) and frees the id.
func (h *Host) openPlan(ctx stdctx.Context, cfg *config.Config, p plan) (*agents.Handle, error) {
	var setupErr error
	setup := func(scope *dshctx.Context) (err error) {
		defer func() { setupErr = err }()
		for i, name := range p.presets {
			list := p.entries[i]
			for j := range list {
				if list[j].Disabled {
					continue
				}
				if _, err := h.apply(scope, cfg, &list[j], fmt.Sprintf("presets.%s[%d]", name, j)); err != nil {
					return err
				}
			}
		}
		for _, x := range p.extra {
			if err := h.applyExtra(scope, x); err != nil {
				return err
			}
		}
		// Checked once the presets are mounted: a provider of the agent's
		// own scope counts as much as one at the root.
		if names := h.models.In(scope).Names(); !slices.Contains(names, p.options.Provider) {
			return p.noProvider(names)
		}
		if p.setup != nil {
			return p.setup(scope)
		}
		return nil
	}
	handle, err := h.createOrResume(ctx, p, setup)
	if err != nil && setupErr != nil {
		// The factory wraps a setup error as PLUGIN_FAILED; ours already
		// say which preset entry or which provider, under their own code.
		return nil, setupErr
	}
	return handle, err
}

// createOrResume starts the agent in the session p asks for.
func (h *Host) createOrResume(ctx stdctx.Context, p plan, setup func(*dshctx.Context) error) (*agents.Handle, error) {
	create := func() (*agents.Handle, error) {
		return h.registry.Create(ctx, agents.CreateOptions{AgentID: p.id, SessionID: p.session, Options: p.options, Setup: setup})
	}
	if p.session == "" || p.mode == freshSession {
		return create()
	}
	handle, err := h.registry.Resume(ctx, agents.ResumeOptions{AgentID: p.id, ResumeSessionID: p.session, Options: p.options, Setup: setup})
	if err != nil {
		return nil, err
	}
	h.log.Info("agent resumed its session", "agent", p.id, "session", p.session, "events", handle.Agent.Session().Len())
	return handle, nil
}
