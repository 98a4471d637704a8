package host

import (
	stdctx "context"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// The host wires the session controller to itself here: services must not
// import the host, so the controller declares the Opener, Catalog and Hub
// it needs and these adapters serve them from the host's agents factory
// (OpenAgent), the session store and services/sessions/live.

// Sessions returns the session controller the host mounts at the root:
// every entry point opens, prompts and closes agents through it.
func (h *Host) Sessions() *sessions.Controller { return h.sessions }

func (h *Host) sessionOptions() sessions.Options {
	return sessions.Options{Opener: hostOpener{h}, Catalog: storeCatalog{h}, NewHub: sessions.LiveHubsWith(live.Options{ApproverGrace: h.approverGrace}), Attachments: h.attachments,
		Goals: h.Config().GoalOptions()}
}

// hostOpener opens a session's agent through OpenAgent, so its presets are
// mounted and its provider checked as for the config's own agents.
type hostOpener struct{ h *Host }

func (o hostOpener) Open(ctx stdctx.Context, spec sessions.Spec) (*agents.Handle, error) {
	return o.h.OpenAgent(ctx, o.agentSpec(spec, false))
}

func (o hostOpener) Resume(ctx stdctx.Context, spec sessions.Spec) (*agents.Handle, error) {
	// A session a preset's store wrote is read through the catalog.
	if err := o.h.ensurePresetCatalog(); err != nil {
		return nil, err
	}
	return o.h.OpenAgent(ctx, o.agentSpec(spec, true))
}

// agentSpec maps the controller's Spec: Spec.Agent is the template when the
// config has an agent of that id (its presets come first, Spec.Presets after
// them); otherwise Spec.Options must name the provider.
func (o hostOpener) agentSpec(spec sessions.Spec, resume bool) AgentSpec {
	as := AgentSpec{
		ID: spec.AgentID, SessionID: spec.SessionID, Resume: resume,
		Workspace: spec.Options.Workspace, Provider: spec.Options.Provider, Model: spec.Options.Model,
		SystemPrompt: spec.Options.SystemPrompt,
	}
	for _, e := range spec.Entries {
		as.Entries = append(as.Entries, config.Entry{Use: e.Use, Config: e.Config})
	}
	var own []string
	if ac, ok := o.h.Config().Agent(spec.Agent); ok {
		as.Template = spec.Agent
		own = ac.PresetNames()
	}
	if len(spec.Presets) > 0 {
		as.Presets = append(append([]string{}, own...), spec.Presets...)
	}
	return as
}

// storeCatalog lists and deletes through the root session store, whose
// backend (a persistence plugin) answers without loading logs, and through
// the presets' stores the root's backend does not cover (catalog.go).
type storeCatalog struct{ h *Host }

func (c storeCatalog) store() (*session.Store, error) { return session.Key.Get(c.h.root) }

func (c storeCatalog) List(ctx stdctx.Context) ([]session.Summary, error) {
	if err := c.h.ensurePresetCatalog(); err != nil {
		return nil, err
	}
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	list, err := st.List(ctx)
	extra := c.h.extraStores()
	if len(extra) == 0 {
		return list, err
	}
	if err != nil && !errs.HasCode(err, session.NoPersistence) {
		return nil, err
	}
	more, err := extra.List(ctx)
	if err != nil {
		return nil, err
	}
	return merged(list, more), nil
}

// ListPage lists one page through the root store, which a backend such
// as session.jsonl answers from its catalog; with the presets' stores it
// cuts the merged listing.
func (c storeCatalog) ListPage(ctx stdctx.Context, opts session.ListOptions) (session.Page, error) {
	if err := c.h.ensurePresetCatalog(); err != nil {
		return session.Page{}, err
	}
	if len(c.h.extraStores()) > 0 {
		list, err := c.List(ctx)
		if err != nil {
			return session.Page{}, err
		}
		return session.Paginate(list, opts)
	}
	st, err := c.store()
	if err != nil {
		return session.Page{}, err
	}
	return st.ListPage(ctx, opts)
}

// Load reads a stored session's log (sessions.LogLoader): the History of
// a session that is not open.
func (c storeCatalog) Load(ctx stdctx.Context, id string) ([]session.Event, error) {
	st, err := c.store()
	if err != nil {
		return nil, err
	}
	return st.Load(ctx, id)
}

// Find asks the root store by key, so a session is found without listing
// every other (session.nats reads one index entry); the presets' stores,
// when the config has any, are asked through their listing.
func (c storeCatalog) Find(ctx stdctx.Context, id string) (session.Summary, bool, error) {
	if err := c.h.ensurePresetCatalog(); err != nil {
		return session.Summary{}, false, err
	}
	if st, err := c.store(); err == nil {
		sum, found, err := st.Find(ctx, id)
		if err != nil || found {
			return sum, found, err
		}
	}
	extra := c.h.extraStores()
	if len(extra) == 0 {
		return session.Summary{}, false, nil
	}
	more, err := extra.List(ctx)
	if err != nil {
		return session.Summary{}, false, err
	}
	for _, sum := range more {
		if sum.ID == id {
			return sum, true, nil
		}
	}
	return session.Summary{}, false, nil
}

func (c storeCatalog) Delete(ctx stdctx.Context, id string) error {
	if err := c.h.ensurePresetCatalog(); err != nil {
		return err
	}
	st, err := c.store()
	if err != nil {
		return err
	}
	err = st.Delete(ctx, id)
	extra := c.h.extraStores()
	if len(extra) == 0 {
		return err
	}
	// A root store records every agent, so a preset's agent is in both:
	// the session goes from each store that holds it.
	rootHad := err == nil
	if err != nil && !errs.HasCode(err, session.NotFound) && !errs.HasCode(err, session.NoPersistence) {
		return err
	}
	err = extra.Delete(ctx, id)
	if rootHad && errs.HasCode(err, session.NotFound) {
		return nil
	}
	return err
}

// LiveClient is the HubClient of the host's sessions: an attached
// live.Client (Next, Answer, LastSeq).
type LiveClient = sessions.LiveClient

// Live returns the live stream of an attachment made through the host's
// session controller, nil when it has none. Transitional: entry points
// stream through sessions.Service.Attach, which re-attaches by itself.
func Live(a *sessions.Attachment) *live.Client {
	if lc, ok := a.Client().(LiveClient); ok {
		return lc.Live()
	}
	return nil
}
