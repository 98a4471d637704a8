package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// dsh run --session ID and --continue pick a persisted session for the
// run. --session resumes ID or, when nothing is stored under it, creates it
// under that id, exactly as an agent's session: key does in the config: a
// script can name its session up front and run the same command every
// time. The choice is pinned as the agent's session: key, so everything
// that opens the agent again (a --watch reload) keeps the same session.

// checkSessionFlags refuses the flag combinations no run can honour.
func checkSessionFlags(f *runFlags, sessionSet bool) error {
	if f.continueLast && sessionSet {
		return fmt.Errorf("--session and --continue both pick the session; give --session ID for a given one, or --continue for the agent's most recent")
	}
	if sessionSet && strings.TrimSpace(f.session) == "" {
		return fmt.Errorf("--session was given an empty id; pass the id dsh printed at the end of a run (dsh sessions list shows them), or leave --session out")
	}
	return nil
}

// persists tells whether the config loads a plugin that stores sessions
// at its root, where the CLI's agents find it.
func persists(cfg *config.Config) bool {
	for _, e := range cfg.Plugins {
		if info, ok := plugin.Lookup(e.Use); ok && info.SessionStore && !e.Disabled {
			return true
		}
	}
	return false
}

// noStoreError is why --session or --continue cannot run without a store.
func noStoreError(flag string) error {
	return errs.New(session.NoPersistence, fmt.Sprintf(
		"%s needs a plugin that persists sessions and the config loads none; add one under plugins:, e.g.\n  - use: session.jsonl\n    config: {dir: sessions}", flag))
}

// configuredAgent is the configured agent that wrote a session, from the
// agent id the store recorded: the CLI's agents run under the configured
// id, the session controller's under "<agent>@<session>".
func configuredAgent(recorded string) string {
	return strings.SplitN(recorded, "@", 2)[0]
}

// chooseSession resolves --session or --continue into the agent to run and
// the session it opens, as the agent's session: key (resumed, or created
// under that id). Errors carry their exit code.
func chooseSession(ctx stdctx.Context, h *host.Host, cfg *config.Config, f *runFlags) (config.AgentConfig, error) {
	list, err := sessions.Service(h.Sessions()).List(ctx)
	switch {
	case errs.HasCode(err, session.NoPersistence):
		return config.AgentConfig{}, &exitCode{code: exitUsage, err: noStoreError(flagName(f))}
	case errs.HasCode(err, session.Unsupported) && !f.continueLast:
		// A store that cannot list still resumes by id; only the check of
		// the session's agent is lost.
	case errs.HasCode(err, session.Unsupported):
		return config.AgentConfig{}, &exitCode{code: exitUsage, err: errs.Wrap(session.Unsupported, err,
			"--continue needs a session store that can list its sessions; name the session with --session ID instead, or use session.jsonl")}
	case err != nil:
		return config.AgentConfig{}, &exitCode{code: exitError, err: fmt.Errorf("%s: cannot read the stored sessions: %w", flagName(f), err)}
	}
	if f.continueLast {
		ac, err := pickAgentConfig(cfg, f.agentID)
		if err != nil {
			return config.AgentConfig{}, &exitCode{code: exitUsage, err: err}
		}
		id, ok := latestOf(list, ac.ID)
		if !ok {
			return config.AgentConfig{}, &exitCode{code: exitNotFound, err: errs.New(session.NotFound, fmt.Sprintf(
				"--continue: no session of agent %q is stored; start one with dsh run --agent %s -p \"...\" (add --session ID to name it), then --continue picks it up",
				ac.ID, ac.ID))}
		}
		ac.Session = id
		return ac, nil
	}
	ac, err := agentOfSession(cfg, list, f.session, f.agentID)
	if err != nil {
		return config.AgentConfig{}, err
	}
	ac.Session = f.session
	return ac, nil
}

func flagName(f *runFlags) string {
	if f.continueLast {
		return "--continue"
	}
	return "--session"
}

// latestOf returns the most recently updated root session agent wrote;
// list is most recent first. A subagent's session (one with a parent) is
// its parent's business, and a session whose agent is unknown (written
// before stores recorded it) cannot be told apart, so neither is taken.
func latestOf(list []session.Summary, agent string) (string, bool) {
	for _, s := range list {
		if s.Parent == "" && s.Agent != "" && configuredAgent(s.Agent) == agent {
			return s.ID, true
		}
	}
	return "", false
}

// agentOfSession picks the agent that runs session id: the one that wrote
// it, or --agent, which must then be that one. A session not stored runs
// --agent's, or the first configured agent's.
func agentOfSession(cfg *config.Config, list []session.Summary, id, agentFlag string) (config.AgentConfig, error) {
	recorded := ""
	for _, s := range list {
		if s.ID == id {
			recorded = configuredAgent(s.Agent)
		}
	}
	if recorded == "" {
		ac, err := pickAgentConfig(cfg, agentFlag)
		if err != nil {
			return config.AgentConfig{}, &exitCode{code: exitUsage, err: err}
		}
		return ac, nil
	}
	if agentFlag != "" && agentFlag != recorded {
		return config.AgentConfig{}, &exitCode{code: exitUsage, err: fmt.Errorf(
			"session %q belongs to agent %q, not %q; leave --agent out to continue it with %s, or start a session of %s under another id",
			id, recorded, agentFlag, recorded, agentFlag)}
	}
	ac, ok := cfg.Agent(recorded)
	if !ok {
		return config.AgentConfig{}, &exitCode{code: exitUsage, err: fmt.Errorf(
			"session %q was written by agent %q, which the config does not define (configured agents: %s); add that agent back to continue it",
			id, recorded, strings.Join(cfg.AgentIDs(), ", "))}
	}
	return ac, nil
}

// openResumable ensures the session of configured agent ac: its session:
// key is resumed when persisted and created under that id when not;
// without one, a fresh session. resumed says whether a stored session was
// continued.
func openResumable(ctx stdctx.Context, svc sessions.Service, ac config.AgentConfig) (in sessions.Info, resumed bool, err error) {
	o := sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: ac.ID, AgentID: ac.ID, SessionID: ac.Session, Source: cliSource}}
	if ac.Session == "" {
		o.Mode = sessions.EnsureCreate
	}
	in, err = svc.Ensure(ctx, o)
	if errs.HasCode(err, session.NoPersistence) {
		return in, false, errs.Wrap(host.StartFailed, err, fmt.Sprintf(
			"agent %q names session %q, which needs a persistence plugin; add a plugin entry such as use: session.jsonl, or remove session:", ac.ID, ac.Session))
	}
	return in, in.How == sessions.HowResumed, err
}

// openFailure gives a failed open its exit code and a message that says
// what to do.
func openFailure(ac config.AgentConfig, err error) error {
	switch {
	case errs.HasCode(err, session.SessionLocked):
		// The store's message names the holder (process and host) when it
		// knows it.
		return &exitCode{code: exitError, err: fmt.Errorf("session %q was not opened and nothing was written to it: %w", ac.Session, err)}
	case errs.HasCode(err, host.SpecInvalid):
		return &exitCode{code: exitUsage, err: err}
	case errs.HasCode(err, session.NoPersistence):
		return &exitCode{code: exitUsage, err: err}
	}
	return &exitCode{code: exitError, err: errs.Wrap(host.StartFailed, err, fmt.Sprintf("agent %q failed to start", ac.ID))}
}

// reportOpened starts a --json stream with one "session/opened" line: the
// session's id (session_id, as in the closing "session/usage" line), the
// configured agent, and whether a stored session was resumed.
func reportOpened(s sessions.Info, agent string, resumed bool, out io.Writer) {
	b, err := json.Marshal(struct {
		Type      string `json:"type"`
		SessionID string `json:"session_id"`
		Agent     string `json:"agent"`
		Resumed   bool   `json:"resumed"`
	}{"session/opened", s.ID, agent, resumed})
	if err == nil {
		out.Write(append(b, '\n'))
	}
}

// reportSessionID ends every dsh run on stderr with the session's id and,
// when it is stored, the command that continues it.
func reportSessionID(id string, stored bool, diag io.Writer) {
	if stored {
		fmt.Fprintf(diag, "dsh: session %s; continue it with: dsh run --session %s\n", id, id)
		return
	}
	fmt.Fprintf(diag, "dsh: session %s (not stored: add a plugin that persists sessions, such as session.jsonl, to continue it later)\n", id)
}
