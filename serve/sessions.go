package serve

import (
	stdctx "context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// httpSource is the default source of the sessions this server opens;
// every prompt names its own (sourceOf: the request's principal).
var httpSource = sessions.Source{Kind: sessions.SourceUser, RPCID: "http", Entry: "serve"}

// sessionJSON is a session as the API shows it: the store's summary, and
// what this server knows of it.
type sessionJSON struct {
	ID      string        `json:"id"`
	Agent   string        `json:"agent,omitempty"`
	Title   string        `json:"title,omitempty"`
	Created time.Time     `json:"created"`
	Updated time.Time     `json:"updated"`
	Turns   int           `json:"turns"`
	State   session.State `json:"state"`
	Parent  string        `json:"parent,omitempty"`
	// Tenant is the tenant the session belongs to; empty for one only
	// operators see.
	Tenant string `json:"tenant,omitempty"`
	Size   int64  `json:"size"`
	// Open: the session is open (here, or where a cluster runs it);
	// Running: a turn runs.
	Open    bool  `json:"open"`
	Running bool  `json:"running"`
	LastSeq int64 `json:"last_seq"`
}

// sessionDetail is GET /v1/sessions/{id}: the session with its pending
// approvals and the outcomes of its last refused requests.
type sessionDetail struct {
	sessionJSON
	Approvals []live.Question    `json:"approvals"`
	Outcomes  []sessions.Outcome `json:"outcomes"`
}

// configuredAgent is the configured agent an agent id was opened from:
// the controller names a session's agent "<agent>@<session id>".
func configuredAgent(agentID string) string {
	name, _, _ := strings.Cut(agentID, "@")
	return name
}

func fromSummary(sum session.Summary) sessionJSON {
	return sessionJSON{ID: sum.ID, Agent: configuredAgent(sum.Agent), Title: sum.Title, Created: sum.Created, Updated: sum.Updated,
		Turns: sum.Turns, State: sum.State, Parent: sum.Parent, Tenant: sum.Tenant, Size: sum.Size, LastSeq: sum.LastSeq}
}

// describeOpen is an open session, as the session service describes it;
// a persisted summary, when there is one, gives the size.
func describeOpen(in sessions.Info, sum *session.Summary) sessionJSON {
	out := sessionJSON{ID: in.ID, Agent: in.Agent, State: session.StateOpen, Open: true}
	if sum != nil {
		out = fromSummary(*sum)
		out.Agent, out.State, out.Open = in.Agent, session.StateOpen, true
	}
	out.Running = in.Running
	out.LastSeq = in.LastSeq
	if in.Tenant != "" {
		out.Tenant = in.Tenant
	}
	if !in.Created.IsZero() {
		out.Created, out.Updated, out.Turns, out.Title = in.Created, in.Updated, in.Turns, in.Title
	}
	if out.Created.IsZero() {
		out.Created = time.Now().UTC()
		out.Updated = out.Created
	}
	return out
}

// info describes session id when it is open: here, or — through a
// cluster's service — on the host that runs it.
func (s *Server) info(ctx stdctx.Context, id string) (sessions.Info, bool) {
	in, err := s.o.Sessions.Info(ctx, id)
	return in, err == nil
}

// describe is session id as the API shows it, open or persisted.
func (s *Server) describe(ctx stdctx.Context, id string) (sessionJSON, error) {
	sum, found, err := s.persisted(ctx, id)
	if err != nil {
		return sessionJSON{}, err
	}
	if in, open := s.info(ctx, id); open {
		var p *session.Summary
		if found {
			p = &sum
		}
		return describeOpen(in, p), nil
	}
	if !found {
		return sessionJSON{}, notFound(id)
	}
	out := fromSummary(sum)
	if out.LastSeq == 0 {
		// A backend that does not keep the last seq: count the log.
		if evs, err := s.o.Sessions.History(ctx, id, 0); err == nil && len(evs) > 0 {
			out.LastSeq = evs[len(evs)-1].Seq
		}
	}
	return out, nil
}

// notOpen answers a call the session service refused with
// SESSION_NOT_FOUND, which it says of a session open nowhere: one that is
// persisted is SESSION_CLOSED (resume it), an unknown one 404. Any other
// error passes as it is.
func (s *Server) notOpen(ctx stdctx.Context, id string, err error) error {
	if !errs.HasCode(err, sessions.NotFound) {
		return err
	}
	_, found, ferr := s.persisted(ctx, id)
	switch {
	case ferr != nil:
		return ferr
	case !found:
		return notFound(id)
	}
	return errs.New(sessions.Closed, fmt.Sprintf("session %q is not open; POST /v1/sessions/%s/resume opens it", id, id))
}

// exists is nil when session id is open or persisted, else its
// SESSION_NOT_FOUND (or the store's error).
func (s *Server) exists(ctx stdctx.Context, id string) error {
	if _, open := s.info(ctx, id); open {
		return nil
	}
	_, found, err := s.persisted(ctx, id)
	if err == nil && !found {
		err = notFound(id)
	}
	return err
}

func notFound(id string) error {
	return errs.New(sessions.NotFound, fmt.Sprintf("no session %q, open or persisted; GET /v1/sessions lists them", id))
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.o.Version})
}

type agentJSON struct {
	ID       string `json:"id"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

func (s *Server) agents(w http.ResponseWriter, _ *http.Request) {
	cfg := s.o.Config
	out := struct {
		Agents  []agentJSON `json:"agents"`
		Presets []string    `json:"presets"`
		Default string      `json:"default"`
	}{Agents: []agentJSON{}, Presets: cfg.DefinedPresets()}
	for _, ac := range cfg.Agents {
		model := ac.Model
		if model == "" {
			model = cfg.DefaultModel(ac.Provider)
		}
		out.Agents = append(out.Agents, agentJSON{ID: ac.ID, Provider: ac.Provider, Model: model})
	}
	for _, p := range config.BuiltinPresets() {
		if !slices.Contains(out.Presets, p.Name) {
			out.Presets = append(out.Presets, p.Name)
		}
	}
	if out.Presets == nil {
		out.Presets = []string{}
	}
	out.Default, _ = cfg.ServeAgent("")
	writeJSON(w, http.StatusOK, out)
}

// listPage answers GET /v1/sessions?agent=&limit=&cursor=: one page of
// the stored sessions, most recently updated first, with the cursor of
// the next in "next".
func (s *Server) listPage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts := session.ListOptions{Agent: q.Get("agent"), Cursor: q.Get("cursor")}
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, fmt.Sprintf("limit is %q; give a number of sessions, 0 for all", l)))
			return
		}
		opts.Limit = n
	}
	p, err := s.tenantPage(r, opts)
	if errs.HasCode(err, errs.InvalidArgument) {
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, err.Error()))
		return
	}
	if err != nil && !errs.HasCode(err, session.NoPersistence) {
		s.writeError(w, r, err)
		return
	}
	out := []sessionJSON{}
	for i := range p.Sessions {
		if p.Sessions[i].State == session.StateOpen {
			if in, open := s.info(r.Context(), p.Sessions[i].ID); open {
				out = append(out, describeOpen(in, &p.Sessions[i]))
				continue
			}
		}
		out = append(out, fromSummary(p.Sessions[i]))
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out, "next": p.Next})
}

func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has("agent") || q.Has("limit") || q.Has("cursor") {
		s.listPage(w, r)
		return
	}
	list, err := s.o.Sessions.List(r.Context())
	if err != nil && !errs.HasCode(err, session.NoPersistence) {
		s.writeError(w, r, err)
		return
	}
	out := []sessionJSON{}
	seen := map[string]bool{}
	for i := range list {
		seen[list[i].ID] = true
		if !s.listed(r, list[i]) {
			continue
		}
		// Only a session the service marks open has more to say; asking
		// for the others would cost a cluster a request each.
		if list[i].State == session.StateOpen {
			if in, open := s.info(r.Context(), list[i].ID); open {
				out = append(out, describeOpen(in, &list[i]))
				continue
			}
		}
		out = append(out, fromSummary(list[i]))
	}
	// Open and never stored (no persistence): the ones this server holds.
	for _, id := range s.heldIDs() {
		if seen[id] {
			continue
		}
		if in, open := s.info(r.Context(), id); open && visible(r, in.Tenant) {
			out = append(out, describeOpen(in, nil))
		}
	}
	slices.SortStableFunc(out, func(a, b sessionJSON) int { return b.Updated.Compare(a.Updated) })
	writeJSON(w, http.StatusOK, map[string]any{"sessions": out})
}

// openRequest is the body of POST /v1/sessions and .../resume.
type openRequest struct {
	Agent     string   `json:"agent,omitempty"`
	Presets   []string `json:"presets,omitempty"`
	Workspace string   `json:"workspace,omitempty"`
	SessionID string   `json:"session_id,omitempty"`
	// PlanMode starts the session in plan mode (tools.plan).
	PlanMode bool `json:"plan_mode,omitempty"`
}

// options resolves a request into the controller's options: the agent
// (default serve.agent, else the first), serve.presets then the request's.
func (s *Server) options(req openRequest) (sessions.OpenOptions, error) {
	cfg := s.o.Config
	agent, ok := cfg.ServeAgent(req.Agent)
	if !ok {
		if agent == "" {
			return sessions.OpenOptions{}, fail(http.StatusBadRequest, BadRequest, "the config has no agent to open a session of; add one under agents:")
		}
		return sessions.OpenOptions{}, fail(http.StatusBadRequest, BadRequest, "no agent %q; configured agents: %s (GET /v1/agents)", agent, strings.Join(cfg.AgentIDs(), ", "))
	}
	for _, p := range req.Presets {
		if _, err := cfg.Preset(p); err != nil {
			return sessions.OpenOptions{}, fail(http.StatusBadRequest, BadRequest, "preset %q: %v (GET /v1/agents lists the presets)", p, err)
		}
	}
	if req.Workspace != "" && !filepath.IsAbs(req.Workspace) {
		return sessions.OpenOptions{}, fail(http.StatusBadRequest, BadRequest, "workspace %q is not an absolute path; send the absolute path of an existing directory", req.Workspace)
	}
	if req.SessionID != "" && !session.ValidID(req.SessionID) {
		return sessions.OpenOptions{}, fail(http.StatusBadRequest, BadRequest, "session_id %q (%d characters) is not a session id: use %s, so that every session store can name it", req.SessionID, len(req.SessionID), session.IDRule)
	}
	// The operator's config bounds what a client chooses (serve.workspaces,
	// serve.client_presets).
	ac, _ := cfg.Agent(agent)
	workspace, err := cfg.ClientWorkspace(ac, req.Workspace)
	if err != nil {
		return sessions.OpenOptions{}, fail(http.StatusForbidden, WorkspaceRefused, "%v", err)
	}
	presets, err := cfg.ClientPresets(ac, req.Presets)
	if err != nil {
		return sessions.OpenOptions{}, fail(http.StatusForbidden, PresetRefused, "%v", err)
	}
	return sessions.OpenOptions{
		Agent: agent, Presets: append(slices.Clone(cfg.Serve.Presets), presets...), Workspace: workspace,
		SessionID: req.SessionID, Source: httpSource, KeepRunning: true,
	}, nil
}

func (s *Server) createSession(w http.ResponseWriter, r *http.Request) {
	var req openRequest
	if err := s.decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	o, err := s.options(req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	o.Tenant = tenantOf(r)
	if o.Tenant != "" && o.SessionID != "" {
		// A tenant is told the id is taken, whoever has it: the answer
		// is the same for its own session and another tenant's, and
		// says nothing of the other.
		if _, exists, err := s.ownerOf(r.Context(), o.SessionID); err != nil || exists {
			if err == nil {
				err = errs.New(session.SessionExists, fmt.Sprintf("session id %q is taken; pick another, or leave session_id out for a fresh one", o.SessionID))
			}
			s.writeError(w, r, err)
			return
		}
	}
	in, err := s.o.Sessions.Ensure(r.Context(), sessions.EnsureOptions{OpenOptions: o, Mode: sessions.EnsureCreate})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.hold(in.ID); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.PlanMode {
		if err := s.enterPlan(r, in.ID); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	w.Header().Set("Location", "/v1/sessions/"+in.ID)
	writeJSON(w, http.StatusCreated, describeOpen(in, nil))
}

// hold keeps a session opened here: the server answers its approvals and
// closes it at shutdown. A session that cannot be held is closed again.
//
// The new approver always replaces one held before: the session service
// hands out no identity of the copy it runs, so an approver cannot tell
// whether the copy it follows is the one open now (a cluster may have
// closed it under the server and resumed another). The replaced approver
// is stopped only after the new one attached, so a question pending at
// the switch reaches the new one (the hub sends it to every approving
// client that attaches) and never finds the session without an answerer.
func (s *Server) hold(id string) error {
	a, err := startApprover(s.o.Sessions, id)
	if err != nil {
		return errors.Join(err, s.o.Sessions.Close(stdctx.Background(), id))
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		a.stop()
		return errors.Join(fail(http.StatusServiceUnavailable, ShuttingDown, "dsh serve is shutting down; the session %q was closed again", id), s.o.Sessions.Close(stdctx.Background(), id))
	}
	prev := s.held[id]
	s.held[id] = &held{id: id, approver: a}
	s.mu.Unlock()
	if prev != nil {
		prev.approver.stop()
	}
	return nil
}

// heldIDs returns the ids of the sessions the server holds, sorted.
func (s *Server) heldIDs() []string {
	s.mu.Lock()
	ids := make([]string, 0, len(s.held))
	for id := range s.held {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	slices.Sort(ids)
	return ids
}

func (s *Server) holding(id string) (*held, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, ok := s.held[id]
	return h, ok
}

func (s *Server) getSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	d, err := s.describe(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := sessionDetail{sessionJSON: d, Approvals: []live.Question{}, Outcomes: []sessions.Outcome{}}
	if h, ok := s.holding(id); ok {
		out.Approvals = h.approver.Pending()
	}
	if in, ok := s.info(r.Context(), id); ok {
		out.Outcomes = append(out.Outcomes, in.Outcomes...)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) resumeSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req openRequest
	if err := s.decode(r, &req, true); err != nil {
		s.writeError(w, r, err)
		return
	}
	if req.SessionID != "" && req.SessionID != id {
		s.writeError(w, r, fail(http.StatusBadRequest, BadRequest, "session_id %q differs from the path's %q; leave it out", req.SessionID, id))
		return
	}
	if in, open := s.info(r.Context(), id); open {
		writeJSON(w, http.StatusOK, describeOpen(in, nil))
		return
	}
	sum, found, err := s.persisted(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !found {
		s.writeError(w, r, notFound(id))
		return
	}
	if req.Agent == "" {
		if name := configuredAgent(sum.Agent); name != "" {
			if _, ok := s.o.Config.Agent(name); ok {
				req.Agent = name
			}
		}
	}
	o, err := s.options(req)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The session stays its tenant's, whoever resumes it (an operator
	// may).
	o.SessionID, o.Tenant = id, sum.Tenant
	in, err := s.o.Sessions.Ensure(r.Context(), sessions.EnsureOptions{OpenOptions: o, Mode: sessions.EnsureExisting})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Joined: a concurrent resume opened it, and holds it.
	if in.How == sessions.HowResumed {
		if err := s.hold(id); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	writeJSON(w, http.StatusOK, describeOpen(in, &sum))
}

// closeCtx bounds a close the client asked for; the client leaving does
// not cut it short, or the session would be left closing.
func (s *Server) closeCtx(r *http.Request) (stdctx.Context, stdctx.CancelFunc) {
	return stdctx.WithTimeout(stdctx.WithoutCancel(r.Context()), s.cfg.ShutdownTimeout+closeGrace)
}

func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var before *sessionJSON
	ctx, cancel := s.closeCtx(r)
	defer cancel()
	if in, open := s.info(ctx, id); open {
		d := describeOpen(in, nil)
		before = &d
	}
	// Closed where it runs: here, or — through a cluster's service — on
	// another host. A session open nowhere is closed already.
	if err := s.closeHeld(ctx, id); err != nil && !errs.HasCode(err, sessions.NotFound) {
		s.writeError(w, r, err)
		return
	}
	d, err := s.describe(r.Context(), id)
	if errs.HasCode(err, sessions.NotFound) && before != nil {
		// Closed, and not persisted (no store): what it was, closed.
		d, err = *before, nil
		d.Open, d.Running, d.State = false, false, session.StateIdle
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, d)
}

// Release makes the server stop holding session id: it no longer answers
// the session's approvals nor closes it at shutdown. A cluster calls it
// (cluster.Options.CloseLocal) before it closes this host's copy of a
// session itself — for a close another host forwarded, or a copy whose
// lease ran out. Closing through the server instead would go back through
// the session service, which in a cluster is the cluster's own close.
func (s *Server) Release(id string) {
	s.mu.Lock()
	h := s.held[id]
	delete(s.held, id)
	s.mu.Unlock()
	if h != nil {
		h.approver.stop()
	}
}

// closeHeld stops answering session id's approvals and closes it.
func (s *Server) closeHeld(ctx stdctx.Context, id string) error {
	s.Release(id)
	return s.o.Sessions.Close(ctx, id)
}

func (s *Server) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !session.ValidID(id) {
		// As for every route: an id that cannot name a session names
		// none, whatever the store would say of its form.
		s.writeError(w, r, notFound(id))
		return
	}
	if err := s.o.Sessions.Delete(r.Context(), id); err != nil {
		if errs.HasCode(err, session.NotFound) {
			err = notFound(id)
		}
		s.writeError(w, r, err)
		return
	}
	// The session is gone: its title goes too, or the next session given
	// its id would inherit it. The delete stands if this fails.
	if err := s.titleStore().set(id, ""); err != nil {
		s.log.Warn("a deleted session's title stays in the titles file", "session", id, "error", err)
	}
	w.WriteHeader(http.StatusNoContent)
}

// ClaimOptions says how this server resumes session id when a cluster
// claims it for a message (cluster.Options.Open): as POST .../resume
// would, with the agent that wrote the session when it is configured,
// else the default agent, and serve.presets.
func (s *Server) ClaimOptions(id string) sessions.OpenOptions {
	var req openRequest
	var tenant string
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if sum, found, err := s.persisted(ctx, id); err == nil && found {
		tenant = sum.Tenant
		if name := configuredAgent(sum.Agent); name != "" {
			if _, ok := s.o.Config.Agent(name); ok {
				req.Agent = name
			}
		}
	}
	o, err := s.options(req)
	if err != nil {
		// No agent to run it: the resume fails with the controller's
		// clear error for an empty agent.
		s.log.Warn("cannot claim a session", "session", id, "error", err)
	}
	o.SessionID, o.Tenant = id, tenant
	return o
}
