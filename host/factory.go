package host

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
)

// SpecInvalid is the code of an AgentSpec the host cannot open as given;
// the reason names the spec field at fault, and so does the message.
const SpecInvalid errs.Code = "HOST_SPEC_INVALID"

// Reasons that go with SpecInvalid, one per AgentSpec field.
const (
	ReasonSpecID        = "host/spec-id"
	ReasonSpecTemplate  = "host/spec-template"
	ReasonSpecPresets   = "host/spec-presets"
	ReasonSpecWorkspace = "host/spec-workspace"
	ReasonSpecProvider  = "host/spec-provider"
	ReasonSpecSession   = "host/spec-session"
	ReasonSpecEntries   = "host/spec-entries"
)

// ReasonSessionOpenHere goes with session.SessionLocked when the session an
// AgentSpec names is already open in this process, by another agent.
const ReasonSessionOpenHere = "host/session-open-here"

// AgentSpec describes an agent to open with OpenAgent.
type AgentSpec struct {
	// ID is the new agent's id, unique among the running agents.
	ID string
	// Template is the id of a configured agent whose settings the new one
	// starts from: provider, model, system prompt, limits, presets and
	// workspace (not its session). Optional.
	Template string
	// Presets name presets of the current config, built-in ones
	// included, mounted in the agent's scope in order. Nil means the
	// template's; an empty, non-nil list means none.
	Presets []string
	// Workspace is the agent's workspace, an absolute path to an existing
	// directory. Empty means the template's, else the directory the
	// config's relative paths start from (the working directory).
	Workspace string
	// SessionID names the session: with Resume, the persisted session to
	// continue; without, the id of a new one (empty: a fresh id).
	SessionID string
	// Resume continues the persisted session SessionID.
	Resume bool
	// Provider, Model and SystemPrompt override the template's when set.
	Provider, Model, SystemPrompt string
	// Entries are plugin entries (use: only) mounted in the agent's scope
	// after its presets, such as the MCP servers an editor hands over for
	// one session; they go away with the agent.
	Entries []config.Entry
}

// openedAgent is an agent a caller opened: the caller's, which Close
// disposes if the caller has not.
type openedAgent struct {
	handle *agents.Handle
}

// OpenAgent creates — or, with spec.Resume, resumes — one agent with its
// presets mounted in its scope and its workspace set: the one way the host
// makes an agent, as the session controller's opener (hostOpener). The
// provider must be registered for the
// agent's scope, at the root or by one of its presets. On any failure
// nothing is left behind: no agent registered, no preset running, the id
// free.
//
// The agent belongs to the caller, who disposes it through the handle. A
// Reload neither recreates nor disposes it, even when its template or
// presets change (the caller opens it again to take them up, after
// Reloaded fires); Close disposes any still open, so none outlives the
// host.
//
// OpenAgent runs on one consistent config, the old or the new: it waits
// for a Reload in progress to finish, and a Reload waits for the opens in
// progress (their preset starts), so the presets it mounts, the root
// plugins it relies on (provider, session store) and the config it reads
// belong to the same generation. Opens run concurrently with each other.
//
// Errors: HOST_SPEC_INVALID with a reason naming the field (unknown
// template or preset, bad workspace, no provider, bad session id);
// AGENT_EXISTS for an id in use; with Resume, SESSION_NOT_FOUND when the
// store does not hold the session and SESSION_LOCKED when it is open
// elsewhere (reason session/other-process or session/closing from the
// store, ReasonSessionOpenHere for this process); HOST_START_FAILED for a
// preset plugin that fails to start; HOST_CLOSED once the host closes,
// also when it closes while the agent is being built.
func (h *Host) OpenAgent(ctx stdctx.Context, spec AgentSpec) (*agents.Handle, error) {
	if ctx == nil {
		ctx = stdctx.Background()
	}
	h.reloading.RLock()
	defer h.reloading.RUnlock()
	h.mu.Lock()
	closed, cfg := h.closed, h.cfg
	h.mu.Unlock()
	if closed {
		return nil, openClosedError(spec.ID)
	}
	p, err := h.specPlan(cfg, spec)
	if err != nil {
		return nil, err
	}
	rec := &openedAgent{}
	p.setup = func(scope *dshctx.Context) error {
		// Whoever disposes the handle — the caller or Close — the host
		// forgets the agent with its scope.
		_, err := scope.OnDispose("host: forget the opened agent", func() error {
			h.mu.Lock()
			if h.opened[spec.ID] == rec {
				delete(h.opened, spec.ID)
			}
			h.mu.Unlock()
			return nil
		})
		return err
	}
	handle, err := h.openPlan(ctx, cfg, p)
	if err != nil {
		if h.isClosed() {
			// The tree went away under the open: what failed (a provider
			// gone with the root, say) is not the spec's fault.
			return nil, errs.Wrap(Closed, err, fmt.Sprintf("cannot open agent %q: the host closed while it was being built", spec.ID))
		}
		return nil, specError(spec, err)
	}
	rec.handle = handle
	h.mu.Lock()
	if h.closed {
		// Close began while the agent was being built and did not see it.
		h.mu.Unlock()
		dctx, cancel := h.bounded(ctx)
		defer cancel()
		if derr := handle.Dispose(dctx); derr != nil {
			h.log.Warn("agent opened while the host closed did not stop cleanly", "agent", spec.ID, "error", derr)
		}
		return nil, openClosedError(spec.ID)
	}
	h.opened[spec.ID] = rec
	h.mu.Unlock()
	h.log.Debug("agent opened", "agent", spec.ID, "provider", p.options.Provider, "session", handle.Agent.Session().ID())
	return handle, nil
}

func openClosedError(id string) error {
	return errs.New(Closed, fmt.Sprintf("cannot open agent %q: the host is closed or closing; open it on a running host", id))
}

func specErr(reason, field, msg string) error {
	return errs.New(SpecInvalid, "AgentSpec."+field+": "+msg).WithReason(reason)
}

// specPlan resolves spec against cfg.
func (h *Host) specPlan(cfg *config.Config, spec AgentSpec) (plan, error) {
	if strings.TrimSpace(spec.ID) == "" {
		return plan{}, specErr(ReasonSpecID, "ID", "the agent id is empty; give the agent an id no running agent has")
	}
	var ac config.AgentConfig
	if spec.Template != "" {
		t, ok := cfg.Agent(spec.Template)
		if !ok {
			return plan{}, specErr(ReasonSpecTemplate, "Template", fmt.Sprintf(
				"no configured agent has id %q; configured agents: %s; name one of them, or leave Template empty and set Provider", spec.Template, orNone(cfg.AgentIDs())))
		}
		ac = t
	}
	ac.ID, ac.Session = spec.ID, spec.SessionID
	if spec.Presets != nil {
		ac.Preset, ac.Presets = "", spec.Presets
	}
	for _, set := range []struct {
		to   *string
		from string
	}{{&ac.Provider, spec.Provider}, {&ac.Model, spec.Model}, {&ac.SystemPrompt, spec.SystemPrompt}} {
		if set.from != "" {
			*set.to = set.from
		}
	}
	if ac.Provider == "" {
		return plan{}, specErr(ReasonSpecProvider, "Provider", fmt.Sprintf(
			"no model provider: set Provider (registered at the root: %s) or a Template that has one", orNone(h.models.Names())))
	}
	ws, err := specWorkspace(cfg, spec, ac.Workspace)
	if err != nil {
		return plan{}, err
	}
	ac.Workspace = ws
	switch {
	case spec.Resume && spec.SessionID == "":
		return plan{}, specErr(ReasonSpecSession, "SessionID", "Resume is set but SessionID is empty; name the persisted session to resume")
	case spec.SessionID != "" && !session.ValidID(spec.SessionID):
		return plan{}, specErr(ReasonSpecSession, "SessionID", fmt.Sprintf(
			"session id %q is not a session id: use %s", spec.SessionID, session.IDRule))
	}

	p := plan{id: ac.ID, options: agentOptions(ac), presets: ac.PresetNames(), session: ac.Session}
	for i, e := range spec.Entries {
		at := fmt.Sprintf("AgentSpec.Entries[%d]", i)
		decoded, err := config.DecodeEntry(e, at)
		if err != nil {
			return plan{}, specErr(ReasonSpecEntries, fmt.Sprintf("Entries[%d]", i), messageOf(err))
		}
		p.extra = append(p.extra, extraEntry{entry: e, config: decoded, at: at})
	}
	if spec.Resume {
		p.mode = resumeOnly
	}
	for i, name := range p.presets {
		if j := slices.Index(p.presets[:i], name); j >= 0 {
			return plan{}, specErr(ReasonSpecPresets, fmt.Sprintf("Presets[%d]", i), fmt.Sprintf("preset %q is listed twice (also Presets[%d]); list each preset once", name, j))
		}
		list, err := cfg.Preset(name)
		if err != nil {
			return plan{}, specErr(ReasonSpecPresets, fmt.Sprintf("Presets[%d]", i), messageOf(err))
		}
		p.entries = append(p.entries, list)
	}
	if conflicts := cfg.StoreConflicts(ac.ID, p.presets); len(conflicts) > 0 {
		return plan{}, specErr(ReasonSpecPresets, "Presets", strings.Join(conflicts, "; "))
	}
	p.noProvider = func(names []string) error {
		return specErr(ReasonSpecProvider, "Provider", fmt.Sprintf(
			"model provider %q is not registered for agent %q, at the root or by its presets (registered: %s); pick one of those, or add a plugin entry such as use: llm.%s",
			ac.Provider, ac.ID, orNone(names), ac.Provider))
	}
	return p, nil
}

// specWorkspace returns the agent's workspace: the spec's, else the
// template's, else the working directory; absolute, clean and existing.
func specWorkspace(cfg *config.Config, spec AgentSpec, template string) (string, error) {
	ws := spec.Workspace
	switch {
	case ws != "" && !filepath.IsAbs(ws):
		return "", specErr(ReasonSpecWorkspace, "Workspace", fmt.Sprintf("%q is relative; give the absolute path of the agent's workspace", ws))
	case ws == "" && template != "":
		ws = template
	case ws == "":
		ws = cfg.WorkingDir()
		if ws == "" {
			wd, err := os.Getwd()
			if err != nil {
				return "", specErr(ReasonSpecWorkspace, "Workspace", fmt.Sprintf("empty, and the working directory cannot be told (%v); give an absolute path", err))
			}
			ws = wd
		}
	}
	ws = filepath.Clean(ws)
	st, err := os.Stat(ws)
	switch {
	case err != nil && os.IsNotExist(err):
		return "", specErr(ReasonSpecWorkspace, "Workspace", fmt.Sprintf("%q does not exist; create the directory or name an existing one", ws))
	case err != nil:
		return "", specErr(ReasonSpecWorkspace, "Workspace", fmt.Sprintf("%q cannot be read: %v", ws, err))
	case !st.IsDir():
		return "", specErr(ReasonSpecWorkspace, "Workspace", fmt.Sprintf("%q is a file, not a directory; name the directory the agent works in", ws))
	}
	return ws, nil
}

// specError names the spec field behind a failure of the agents factory,
// keeping the factory's or the store's code outermost.
func specError(spec AgentSpec, err error) error {
	reason := errs.ReasonOf(err)
	switch errs.CodeOf(err) {
	case agents.AgentExists:
		return errs.Wrap(agents.AgentExists, err, fmt.Sprintf("AgentSpec.ID: cannot open agent %q", spec.ID)).WithReason(reason)
	case session.NotFound:
		return errs.Wrap(session.NotFound, err, fmt.Sprintf(
			"AgentSpec.SessionID: session %q is not in the session store, so it cannot be resumed; check the id, or open without Resume to start a new session under it", spec.SessionID))
	case session.NoPersistence:
		return errs.Wrap(session.NoPersistence, err, fmt.Sprintf(
			"AgentSpec.Resume: resuming session %q needs a plugin that persists sessions; add a plugin entry such as use: session.jsonl under plugins:", spec.SessionID))
	case session.SessionLocked:
		// The store's message already names the session, who holds it
		// and what to do; a second sentence would only repeat it.
		return err
	case session.SessionExists:
		return errs.Wrap(session.SessionLocked, err, fmt.Sprintf(
			"AgentSpec.SessionID: session %q is open in this process by another agent; close that agent's session first", spec.SessionID)).WithReason(ReasonSessionOpenHere)
	}
	return err
}

// messageOf is an error's message without its code.
func messageOf(err error) string {
	if e, ok := err.(*errs.Error); ok && e.Cause == nil {
		return e.Message
	}
	return err.Error()
}
