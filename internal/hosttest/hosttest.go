// Package hosttest starts a host for tests and opens the config's agents
// the way every entry point does: as sessions of the host's session
// controller, whose opener builds each agent with its presets. The host
// itself starts no agent, so a test that talks to a configured agent opens
// it here first.
package hosttest

import (
	stdctx "context"
	"errors"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// Start starts a host for cfg and opens every configured agent (OpenAll).
// If one cannot open, the host is closed and the error says which.
func Start(cfg *config.Config, opts host.Options) (*host.Host, error) {
	h, err := host.Start(cfg, opts)
	if err != nil {
		return nil, err
	}
	if err := OpenAll(h); err != nil {
		return nil, errors.Join(err, h.Close(stdctx.Background()))
	}
	return h, nil
}

// OpenAll opens the configured agents in config order (Open).
func OpenAll(h *host.Host) error {
	for _, ac := range h.Config().Agents {
		if _, err := Open(stdctx.Background(), h, ac.ID); err != nil {
			return err
		}
	}
	return nil
}

// Open opens configured agent id as a session registered under the id
// itself, so h.Agent(id) finds it. An agent with a session: key resumes
// that session when the store holds it and starts it under that id when
// not, as dsh run does. The session stays open until it is closed or the
// host closes.
func Open(ctx stdctx.Context, h *host.Host, id string) (*sessions.Session, error) {
	ac, ok := h.Config().Agent(id)
	if !ok {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("hosttest: the config has no agent %q; name one of %v", id, h.Config().AgentIDs()))
	}
	o := sessions.OpenOptions{Agent: id, AgentID: id, KeepRunning: true}
	var s *sessions.Session
	var err error
	if ac.Session != "" {
		s, err = h.Sessions().Resume(ctx, ac.Session, o)
		if errs.HasCode(err, session.NotFound) {
			o.SessionID = ac.Session
			s, err = h.Sessions().Open(ctx, o)
		}
	} else {
		s, err = h.Sessions().Open(ctx, o)
	}
	if err != nil {
		return nil, fmt.Errorf("hosttest: agent %q failed to open: %w", id, err)
	}
	return s, nil
}

// Agents returns the configured agents that are open under their own id
// (as Open opens them), in config order.
func Agents(h *host.Host) []agents.Agent {
	var out []agents.Agent
	for _, ac := range h.Config().Agents {
		if a, ok := h.Agent(ac.ID); ok {
			out = append(out, a)
		}
	}
	return out
}

// Session returns the open session whose agent is registered under
// agentID.
func Session(h *host.Host, agentID string) (*sessions.Session, bool) {
	for _, s := range h.Sessions().Sessions() {
		if s.AgentID() == agentID {
			return s, true
		}
	}
	return nil, false
}
