package sessions

import (
	stdctx "context"
	"errors"
	"fmt"
	"sort"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/session"
	"github.com/google/uuid"
)

// Key is the service key.
var Key = dshctx.NewKey[*Controller]("sessions")

// Options configure the controller. Every field may be left zero.
type Options struct {
	// Opener creates the sessions' agents; nil opens them through the
	// agents registry with no setup (RegistryOpener), which cannot mount
	// presets.
	Opener Opener
	// Catalog lists and deletes persisted sessions; nil makes List and
	// Delete report that no persistence is loaded.
	Catalog Catalog
	// NewHub makes each session's live hub; nil serves no live events
	// (Attach then only counts the client as an owner).
	NewHub HubFactory
	// Attachments stores the parts of prompts and is released when a
	// session is deleted; nil takes the attachments service from the
	// agent's scope when a prompt has parts, and deletes no attachments.
	Attachments *attachments.Store
	// Goals configure how the sessions' goals are driven (goal.go).
	Goals GoalOptions
}

// Plugin provides the controller. Its config is an Options value (or nil),
// given by the code that mounts it — the host wires its own Opener and the
// persistence backend's Catalog.
var Plugin = dshctx.Define("sessions", func(ctx *dshctx.Context, opts Options) error {
	reg, err := agents.Key.Get(ctx)
	if err != nil {
		return err
	}
	deliver, err := agentcontroller.Key.Get(ctx)
	if err != nil {
		return err
	}
	c := New(reg, deliver, opts)
	// Registered before the service is provided, so it runs after the
	// service is withdrawn: nobody can open a session while they close.
	if _, err := ctx.OnDisposeCtx("close every session", c.dispose); err != nil {
		return err
	}
	return Key.Provide(ctx, c)
}, agents.Key, agentcontroller.Key)

// Controller is the session controller service.
type Controller struct {
	registry *agents.Registry
	deliver  *agentcontroller.Controller
	opener   Opener
	catalog  Catalog
	newHub   HubFactory
	attach   *attachments.Store
	goalOpts GoalOptions

	// stop ends when the controller is disposed; opens in flight see it.
	stop   stdctx.Context
	cancel stdctx.CancelFunc
	// pending counts the opens in flight, which dispose waits for.
	pending sync.WaitGroup

	mu       sync.Mutex
	stopped  bool
	sessions map[string]*Session // open and closing sessions by id
	// opening holds the session ids being opened; each channel closes
	// when its open ends, waking the Ensures that wait to join it.
	opening map[string]chan struct{}
}

// New returns a controller; Plugin is the usual way to get one. The caller
// of New disposes what it opened with Dispose.
func New(reg *agents.Registry, deliver *agentcontroller.Controller, opts Options) *Controller {
	c := &Controller{registry: reg, deliver: deliver, opener: opts.Opener, catalog: opts.Catalog, newHub: opts.NewHub,
		attach: opts.Attachments, goalOpts: opts.Goals,
		sessions: map[string]*Session{}, opening: map[string]chan struct{}{}}
	if c.opener == nil {
		c.opener = RegistryOpener{Registry: reg}
	}
	c.stop, c.cancel = stdctx.WithCancel(stdctx.Background())
	return c
}

// OpenOptions describe a session to open or resume.
type OpenOptions struct {
	// Agent is the configured agent id or template; required.
	Agent string
	// AgentID is the id the session's agent registers under. Empty means
	// "<Agent>@<session id>", so several sessions of one configured agent
	// can run side by side.
	AgentID string
	// Presets are mounted in the agent's scope after the agent's own.
	Presets []string
	// Workspace overrides the agent's workspace (an absolute path).
	Workspace string
	// SessionID names the new session; empty makes a fresh one. Resume
	// takes it as its argument.
	SessionID string
	// Provider and Model override the agent's model.
	Provider, Model string
	// Options are the agent's base settings, for openers that know no
	// configured agents (RegistryOpener); the overrides above win.
	Options agents.Options
	// Source is who prompts by default: a PromptRequest without one uses
	// it. Zero means a user.
	Source agentcontroller.Source
	// Entries are plugins mounted in this session's agent only, after its
	// presets (an editor's MCP servers); they go away with the agent.
	Entries []Entry
	// KeepRunning keeps the session open when its last client detaches,
	// as a server session does; it then ends by Close or when the
	// controller is disposed.
	KeepRunning bool
	// Tenant is the tenant the session belongs to, recorded with its log
	// (session.Session.SetTenant). Empty leaves a resumed session's tenant
	// as its log has it, and makes a new session an operator's.
	Tenant string
}

// Open opens a new session: it creates the agent through the Opener and
// returns the session's record, owned by the caller (see Session.Detach).
func (c *Controller) Open(ctx stdctx.Context, o OpenOptions) (*Session, error) {
	return c.open(ctx, o, false)
}

// Resume opens a persisted session. One open elsewhere (another process)
// is refused by the store with session.SessionLocked; one open in this
// controller is refused with the same code and reason ReasonOpenHere —
// attach to it with Get instead.
func (c *Controller) Resume(ctx stdctx.Context, sessionID string, o OpenOptions) (*Session, error) {
	if sessionID == "" {
		return nil, errs.New(errs.InvalidArgument, "sessions.Resume: the session id is empty; List shows the persisted sessions")
	}
	o.SessionID = sessionID
	return c.open(ctx, o, true)
}

func (c *Controller) open(ctx stdctx.Context, o OpenOptions, resume bool) (_ *Session, err error) {
	if o.Agent == "" {
		return nil, errs.New(errs.InvalidArgument, "sessions: OpenOptions.Agent is empty; name the configured agent (or template) the session runs")
	}
	if ctx == nil {
		ctx = stdctx.Background()
	}
	spec := c.spec(o)
	if err := c.reserve(spec.SessionID); err != nil {
		return nil, err
	}
	defer c.pending.Done()
	published := false
	defer func() {
		if !published {
			c.unreserve(spec.SessionID)
		}
	}()

	octx, release := c.bound(ctx)
	var h *agents.Handle
	if resume {
		h, err = c.opener.Resume(octx, spec)
	} else {
		h, err = c.opener.Open(octx, spec)
	}
	release()
	if err != nil {
		if gone := c.ownerGone(ctx); gone != nil {
			return nil, errors.Join(gone, err)
		}
		return nil, err
	}
	if log := h.Agent.Session(); log != nil {
		// Before the session is published, so before its first event.
		log.SetTenant(o.Tenant)
	}
	s := newSession(c, spec, o, h)
	if err := c.ownerGone(ctx); err != nil {
		return nil, s.abandon(err)
	}
	if c.newHub != nil {
		if s.hub, err = c.newHub(h.Agent); err != nil {
			return nil, s.abandon(errs.Wrap(errs.PluginFailed, err, fmt.Sprintf("session %q: the live hub failed to start", spec.SessionID)))
		}
	}
	c.mu.Lock()
	if gone := c.ownerGoneLocked(ctx); gone != nil {
		c.mu.Unlock()
		return nil, s.abandon(gone)
	}
	c.endOpening(spec.SessionID)
	c.sessions[spec.SessionID] = s
	published = true
	c.mu.Unlock()
	// A goal the log holds is driven on from here.
	s.resumeGoal()
	return s, nil
}

// spec resolves the options into what the opener needs.
func (c *Controller) spec(o OpenOptions) Spec {
	sp := Spec{Agent: o.Agent, AgentID: o.AgentID, Presets: o.Presets, SessionID: o.SessionID, Options: o.Options, Entries: o.Entries}
	if sp.SessionID == "" {
		sp.SessionID = o.Agent + "-session-" + uuid.NewString()
	}
	if sp.AgentID == "" {
		sp.AgentID = o.Agent + "@" + sp.SessionID
	}
	if o.Workspace != "" {
		sp.Options.Workspace = o.Workspace
	}
	if o.Provider != "" {
		sp.Options.Provider = o.Provider
	}
	if o.Model != "" {
		sp.Options.Model = o.Model
	}
	return sp
}

// reserve claims a session id for an open; the caller ends it with
// pending.Done.
func (c *Controller) reserve(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return stoppedErr()
	}
	if s, open := c.sessions[id]; open && !s.Open() {
		// A Close cut short by its context leaves the session closing:
		// attaching would not help, finishing the close does.
		return errs.New(session.SessionLocked, fmt.Sprintf(
			"session %q is still closing in this session controller (an earlier Close ran out of time); call Close on it again to finish, then open it", id)).WithReason(ReasonClosingHere)
	}
	if _, open := c.sessions[id]; open || c.opening[id] != nil {
		return errs.New(session.SessionLocked, fmt.Sprintf(
			"session %q is already open in this session controller; attach to it (Controller.Get) instead of opening it again", id)).WithReason(ReasonOpenHere)
	}
	c.opening[id] = make(chan struct{})
	c.pending.Add(1)
	return nil
}

func (c *Controller) unreserve(id string) {
	c.mu.Lock()
	c.endOpening(id)
	c.mu.Unlock()
}

// endOpening ends the open of id, waking who waits to join it; the caller
// holds mu.
func (c *Controller) endOpening(id string) {
	if ch := c.opening[id]; ch != nil {
		close(ch)
		delete(c.opening, id)
	}
}

// bound is ctx, also ended when the controller is disposed.
func (c *Controller) bound(ctx stdctx.Context) (stdctx.Context, func()) {
	b, cancel := stdctx.WithCancelCause(ctx)
	stop := stdctx.AfterFunc(c.stop, func() { cancel(stoppedErr()) })
	return b, func() { stop(); cancel(nil) }
}

// ownerGone says why an open must not publish its session: its caller gave
// up or the controller was disposed.
func (c *Controller) ownerGone(ctx stdctx.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ownerGoneLocked(ctx)
}

func (c *Controller) ownerGoneLocked(ctx stdctx.Context) error {
	if c.stopped {
		return stoppedErr()
	}
	if ctx.Err() != nil {
		return stdctx.Cause(ctx)
	}
	return nil
}

// Get returns an open session.
func (c *Controller) Get(id string) (*Session, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[id]
	return s, ok
}

// Sessions returns the open sessions sorted by id.
func (c *Controller) Sessions() []*Session {
	c.mu.Lock()
	out := make([]*Session, 0, len(c.sessions))
	for _, s := range c.sessions {
		out = append(out, s)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// Close closes the open session id whoever owns it; see Session.Close.
func (c *Controller) Close(ctx stdctx.Context, id string) error {
	s, ok := c.Get(id)
	if !ok {
		return notFound(id)
	}
	return s.Close(ctx)
}

// List returns the persisted sessions through the Catalog, the ones open
// in this controller marked open, held by its agent.
func (c *Controller) List(ctx stdctx.Context) ([]session.Summary, error) {
	if c.catalog == nil {
		return nil, noCatalog("list the sessions")
	}
	list, err := c.catalog.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range list {
		if s, open := c.Get(list[i].ID); open {
			list[i].State = session.StateOpen
			list[i].Holder = fmt.Sprintf("agent %q of this session controller", s.AgentID())
		}
	}
	return list, nil
}

// Delete removes a persisted session through the Catalog. A session open
// in this controller is refused with session.SessionLocked (reason
// ReasonOpenHere); close it first.
func (c *Controller) Delete(ctx stdctx.Context, id string) error {
	c.mu.Lock()
	_, open := c.sessions[id]
	opening := c.opening[id] != nil
	c.mu.Unlock()
	if open || opening {
		return errs.New(session.SessionLocked, fmt.Sprintf("session %q is open in this session controller; close it before deleting it", id)).WithReason(ReasonOpenHere)
	}
	if c.catalog == nil {
		return noCatalog(fmt.Sprintf("delete session %q", id))
	}
	if err := c.catalog.Delete(ctx, id); err != nil {
		return err
	}
	return c.releaseAttachments(id)
}

func noCatalog(what string) error {
	return errs.New(session.NoPersistence, fmt.Sprintf(
		"cannot %s: no session persistence with a catalog is loaded; add a persistence plugin such as session.jsonl to the config", what))
}

// Dispose closes every session and refuses new ones; Plugin calls it when
// the controller's fiber is disposed.
func (c *Controller) Dispose(ctx stdctx.Context) error { return c.dispose(ctx) }

func (c *Controller) dispose(ctx stdctx.Context) error {
	c.mu.Lock()
	c.stopped = true
	c.mu.Unlock()
	c.cancel()
	// Opens in flight see the stop and dispose what they made.
	c.pending.Wait()
	var failed []error
	for _, s := range c.Sessions() {
		if err := s.Close(ctx); err != nil {
			failed = append(failed, err)
		}
	}
	return errors.Join(failed...)
}

// forget drops a closed session's record.
func (c *Controller) forget(s *Session) {
	c.mu.Lock()
	if c.sessions[s.id] == s {
		delete(c.sessions, s.id)
	}
	c.mu.Unlock()
}
