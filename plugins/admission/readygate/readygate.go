// Package readygate is the admission.ready-gate plugin: it holds messages to
// an agent until a plugin reports the agent ready, and refuses them (reason
// admission/not-ready) when that takes longer than the timeout. A message
// from an unattended source — a schedule, a webhook — is never held longer
// than the unattended timeout, which defaults to not holding it at all.
//
// Plugins report readiness through the service under Key.
package readygate

import (
	stdctx "context"
	"fmt"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
)

// Reason is the refusal reason.
const Reason = "admission/not-ready"

// Config is the plugin's configuration.
type Config struct {
	// Timeout is how long a message waits for readiness (default 30s).
	Timeout time.Duration `koanf:"timeout" json:"timeout,omitempty"`
	// UnattendedTimeout is the wait for unattended sources (default 0: an
	// unattended message to an agent that is not ready is refused at once).
	UnattendedTimeout time.Duration `koanf:"unattended_timeout" json:"unattended_timeout,omitempty"`
	// ReadyByDefault makes agents ready until a plugin says otherwise.
	ReadyByDefault bool `koanf:"ready_by_default" json:"ready_by_default,omitempty"`
}

// Key is the readiness service.
var Key = dshctx.NewKey[*Gate]("admission.readiness")

// Gate tracks which agents are ready.
type Gate struct {
	cfg     Config
	mu      sync.Mutex
	ready   map[string]bool
	changed chan struct{} // closed and replaced on every report
}

// NewGate returns a gate for cfg.
func NewGate(cfg Config) *Gate {
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	return &Gate{cfg: cfg, ready: map[string]bool{}, changed: make(chan struct{})}
}

// Report sets whether agentID is ready and wakes held messages.
func (g *Gate) Report(agentID string, ready bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ready[agentID] = ready
	close(g.changed)
	g.changed = make(chan struct{})
}

// Ready reports whether agentID is ready.
func (g *Gate) Ready(agentID string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.readyLocked(agentID)
}

func (g *Gate) readyLocked(agentID string) bool {
	r, ok := g.ready[agentID]
	if !ok {
		return g.cfg.ReadyByDefault
	}
	return r
}

func (g *Gate) forget(agentID string) {
	g.mu.Lock()
	delete(g.ready, agentID)
	g.mu.Unlock()
}

// hold waits until the agent is ready, the limit passes or ctx ends.
func (g *Gate) hold(ctx stdctx.Context, agentID string, limit time.Duration) (bool, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		g.mu.Lock()
		ready, ch := g.readyLocked(agentID), g.changed
		g.mu.Unlock()
		if ready {
			return true, nil
		}
		select {
		case <-ch:
		case <-timer.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

func (g *Gate) listen(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
	limit := g.cfg.Timeout
	if a.Source.IsUnattended() {
		limit = g.cfg.UnattendedTimeout
	}
	ok := g.Ready(a.Agent.ID())
	if !ok && limit > 0 {
		var err error
		if ok, err = g.hold(ctx, a.Agent.ID(), limit); err != nil {
			return agentcontroller.Decision{}, err
		}
	}
	if !ok {
		msg := fmt.Sprintf("agent %q is not ready yet (waited %s); try again later under a new request id", a.Agent.ID(), limit)
		if limit > 0 {
			// The message waited and its time ran out: an expiry, not a
			// check that turned it down.
			return agentcontroller.Expire(Reason, msg, false), nil
		}
		return agentcontroller.Reject(Reason, msg, false), nil
	}
	return next.Call(ctx, a)
}

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	if c.Timeout < 0 || c.UnattendedTimeout < 0 {
		return errs.New(errs.InvalidArgument, "timeouts cannot be negative; set timeout and unattended_timeout to 0 (the default) or more")
	}
	return nil
}

// Plugin is admission.ready-gate.
var Plugin = plugin.Register("admission.ready-gate", "holds messages until a plugin reports the agent ready; refuses after a timeout", func(ctx *dshctx.Context, cfg Config) error {
	g := NewGate(cfg)
	if _, err := agentcontroller.EventAdmission.On(ctx, g.listen); err != nil {
		return err
	}
	if _, err := agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error { g.forget(a.ID()); return nil }); err != nil {
		return err
	}
	return Key.Provide(ctx, g)
})
