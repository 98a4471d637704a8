package acp

import (
	stdctx "context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/google/uuid"
)

// conv is one ACP session: a session of the session service, the
// server's stream of its live events and the pump that turns them into
// session/update notifications.
type conv struct {
	srv    *Server
	id     acp.SessionId
	stream sessions.Stream
	mode   *modePolicy
	// planning: the agent has plan mode (tools.plan), so the mode plan
	// is offered; set as the session opens (plan.go).
	planning bool
	cwd      string
	// down are the editor's MCP servers the session opened without.
	down []unavailable
	// unlink forgets the session's link (link.go) once it has closed.
	unlink func()
	// ctx ends when the session closes.
	ctx    stdctx.Context
	cancel stdctx.CancelFunc

	// sendMu keeps the pump's notifications and the request handlers'
	// in one order on the wire.
	sendMu sync.Mutex
	// text encodes text chunks; sendMu guards it.
	text textUpdate

	mu        sync.Mutex
	changed   chan struct{} // closed and replaced on every change
	forwarded int64         // last durable seq sent to the client
	replayTo  int64         // events up to here are history (load)
	streamed  map[string]sent
	// announced are the tool calls sent as pending and not ended yet;
	// early the ones whose start came before their tool/call event.
	announced map[string]bool
	early     map[string]bool
	titled    bool
	questions map[int64]stdctx.CancelFunc
	// askedBy is which ask put each question's cancel in questions: after
	// a re-attach the hub asks a question again under the same id, and the
	// first ask's goroutine must not remove the second's cancel.
	askedBy  map[int64]uint64
	asks     uint64
	pumpDone chan struct{}
	// work counts the goroutines of permission requests and cancels,
	// which close waits for.
	work      sync.WaitGroup
	closing   bool
	closeOnce sync.Once
	// retryMu serializes the closes after the first; closeErr is what
	// the last one returned.
	retryMu  sync.Mutex
	closeErr error
}

// openKind says how a session is opened.
type openKind int

const (
	openNew openKind = iota
	openLoad
	openResume
)

// open opens (or resumes) a session for the client and starts its pump;
// for a load it returns once the history has been sent.
func (s *Server) open(ctx stdctx.Context, kind openKind, id acp.SessionId, cwd string, servers []acp.McpServer) (*conv, error) {
	if !filepath.IsAbs(cwd) {
		return nil, errs.New(BadParams, fmt.Sprintf("cwd %q is not an absolute path; send the absolute path of the project directory", cwd))
	}
	mcp, skipped := s.mcpEntries(servers, cwd)
	o := sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{
		Agent: s.opts.Agent, Presets: s.opts.Presets, Workspace: filepath.Clean(cwd),
		SessionID: string(id), Source: s.agentSourceOf(""),
	}, Mode: sessions.EnsureExisting}
	if kind == openNew {
		o.Mode = sessions.EnsureCreate
	} else {
		s.mu.Lock()
		_, here := s.sessions[id]
		s.mu.Unlock()
		if here {
			return nil, errs.New(BadParams, fmt.Sprintf("session %q is already open on this connection; keep using it, or session/close it first", id))
		}
	}
	lk, entry, unlink := newLink(s.connID+"/"+uuid.NewString(), s.opts.Mode)
	// One broken server of the editor's must not cost the person the
	// session, and the advice the mcp plugin gives (on_unavailable: skip)
	// is no setting an editor user has: the session opens without it, and
	// the editor is told which server and why (report).
	down := skipped
	for {
		o.Entries = append(entriesOf(mcp), entry)
		info, err := s.opts.Sessions.Ensure(ctx, o)
		if i, why, ok := failedServer(err, mcp); ok {
			s.log.Warn("an MCP server of the editor's did not start; the session opens without it", "server", mcp[i].Label, "error", why)
			down = append(down, unavailable{Label: mcp[i].Label, Name: mcp[i].Name, Why: why})
			mcp = append(mcp[:i:i], mcp[i+1:]...)
			continue
		}
		if err != nil {
			unlink()
			return nil, err
		}
		if info.How == sessions.HowJoined {
			// Another client of this process has it open: the editor
			// would share its agent, its mode and its close.
			unlink()
			return nil, errs.New(session.SessionLocked, fmt.Sprintf(
				"session %q is already open in this dsh process (another client has it); close it there first, or open a new session", info.ID)).WithReason(sessions.ReasonOpenHere)
		}
		st, err := s.start(info, kind, o.Workspace, lk, unlink)
		if err != nil {
			cctx, cancel := stdctx.WithTimeout(stdctx.Background(), s.opts.CloseTimeout)
			defer cancel()
			return nil, errors.Join(err, s.closeSession(cctx, info.ID, unlink))
		}
		st.down = down
		return st, nil
	}
}

// closeSession closes a session the server opened, then forgets its link;
// one closed already (the service's end closed it) is no error.
func (s *Server) closeSession(ctx stdctx.Context, id string, unlink func()) error {
	err := s.opts.Sessions.Close(ctx, id)
	if err != nil && !errs.HasCode(err, sessions.NotFound) {
		return err
	}
	unlink()
	return nil
}

// start streams the session's live events, links the session's agent to
// the conv and starts the pump.
func (s *Server) start(info sessions.Info, kind openKind, cwd string, lk *link, unlink func()) (*conv, error) {
	last := info.LastSeq
	after := int64(0)
	if kind == openResume {
		// A resumed session shows only what happens from now on.
		after = last
	}
	stream, err := s.opts.Sessions.Attach(s.ctx, info.ID, sessions.AttachOptions{AfterSeq: after, Approvals: true, Name: "acp"})
	if err != nil {
		return nil, err
	}
	st := &conv{
		srv: s, id: acp.SessionId(info.ID), stream: stream, mode: lk.mode, cwd: cwd, unlink: unlink,
		changed: make(chan struct{}), streamed: map[string]sent{}, announced: map[string]bool{}, early: map[string]bool{},
		questions: map[int64]stdctx.CancelFunc{}, askedBy: map[int64]uint64{},
		pumpDone: make(chan struct{}), forwarded: after, replayTo: last,
	}
	st.ctx, st.cancel = stdctx.WithCancel(s.ctx)
	lk.conv.Store(st)
	s.mu.Lock()
	if s.ctx.Err() != nil {
		// The connection ended while the session opened: closeAll has run
		// and would never see it.
		s.mu.Unlock()
		st.cancel()
		return nil, errors.Join(errs.New(sessions.Closed, "acp: the client went away while its session opened"), stream.Close())
	}
	s.sessions[st.id] = st
	s.mu.Unlock()
	go st.pump()
	return st, nil
}

// waitForwarded waits until the pump has sent every durable event up to
// seq, or the session closes, or the pump ended (its stream was lost:
// nothing more will be sent).
func (st *conv) waitForwarded(seq int64) {
	for {
		st.mu.Lock()
		done, ch := st.forwarded >= seq, st.changed
		st.mu.Unlock()
		if done {
			return
		}
		select {
		case <-ch:
		case <-st.ctx.Done():
			return
		case <-st.pumpDone:
			return
		}
	}
}

// notify wakes the waiters; st.mu is held.
func (st *conv) notifyLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// close ends the server's stream and closes the session (sessions the
// server opens are its own): the agent is disposed and the session
// flushed. A close that failed — the agent did not stop within ctx —
// leaves the session closing, and each later close tries again until one
// succeeds.
func (st *conv) close(ctx stdctx.Context) error {
	first := false
	st.closeOnce.Do(func() {
		first = true
		st.mu.Lock()
		st.closing = true
		st.mu.Unlock()
		st.cancel()
		// A client that stopped reading can hold the pump in a write: the
		// agent is stopped and its session saved all the same.
		// It gets a quarter of the close's time; the rest is the agent's.
		t := time.NewTimer(st.srv.opts.CloseTimeout / 4)
		defer t.Stop()
		stuck := false
		select {
		case <-st.pumpDone:
			st.work.Wait()
		case <-t.C:
			stuck = true
		case <-ctx.Done():
			stuck = true
		}
		st.closeErr = errors.Join(st.stream.Close(), st.srv.closeSession(ctx, string(st.id), st.unlink))
		if stuck {
			st.srv.log.Warn("the session closed while the client was not reading its updates", "session", st.id)
		}
	})
	st.retryMu.Lock()
	defer st.retryMu.Unlock()
	if !first && st.closeErr != nil {
		st.closeErr = st.srv.closeSession(ctx, string(st.id), st.unlink)
	}
	return st.closeErr
}

// spawn runs fn on a goroutine close waits for; none starts once the
// session is closing.
func (st *conv) spawn(fn func()) {
	st.mu.Lock()
	if st.closing {
		st.mu.Unlock()
		return
	}
	st.work.Add(1)
	st.mu.Unlock()
	go func() {
		defer st.work.Done()
		fn()
	}()
}

func (st *conv) send(u acp.SessionUpdate) {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	st.sendLocked(u)
}

// sendText sends text as an agent_message_chunk or agent_thought_chunk
// (kind), encoded by the pump rather than the SDK (update.go).
func (st *conv) sendText(kind, text string) {
	st.sendMu.Lock()
	defer st.sendMu.Unlock()
	// The SDK refuses to send once the connection's ctx ended; so does this.
	if err := st.srv.ctx.Err(); err != nil {
		st.srv.log.Debug("session/update not sent", "session", st.id, "error", err)
		return
	}
	if _, err := st.srv.out.Write(st.text.encode(string(st.id), kind, text)); err != nil {
		st.srv.log.Debug("session/update not sent", "session", st.id, "error", err)
	}
}

func (st *conv) sendLocked(u acp.SessionUpdate) {
	if err := st.srv.conn.SessionUpdate(st.srv.ctx, acp.SessionNotification{SessionId: st.id, Update: u}); err != nil {
		st.srv.log.Debug("session/update not sent", "session", st.id, "error", err)
	}
}
