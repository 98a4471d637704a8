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
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/sessions"
)

// session is one ACP session: a session of the controller, the server's
// attachment to its live hub and the pump that turns the hub's updates
// into session/update notifications.
type conv struct {
	srv  *Server
	id   acp.SessionId
	s    *sessions.Session
	tab  *sessions.Attachment
	mode *modePolicy
	cwd  string
	// down are the editor's MCP servers the session opened without.
	down []unavailable
	// ctx ends when the session closes.
	ctx    stdctx.Context
	cancel stdctx.CancelFunc

	// sendMu keeps the pump's notifications and the tool listener's in
	// one order on the wire.
	sendMu sync.Mutex
	// text encodes text chunks; sendMu guards it.
	text textUpdate

	mu        sync.Mutex
	turnOf    map[string]int  // message id → turn
	dropped   map[string]bool // message ids a cancel or close dropped
	ended     map[int]turnEnd // turn → how it ended
	changed   chan struct{}   // closed and replaced on every change
	cancelled chan struct{}   // closed by session/cancel, then replaced
	forwarded int64           // last durable seq sent to the client
	replayTo  int64           // events up to here are history (load)
	streamed  map[string]sent // what of each message went out
	announced map[string]chan struct{}
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

type turnEnd struct {
	reason, err string
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
	mcp := s.mcpEntries(servers, cwd)
	o := sessions.OpenOptions{
		Agent: s.opts.Agent, Presets: s.opts.Presets, Workspace: filepath.Clean(cwd),
		Source: agentSourceOf(""),
	}
	if kind != openNew {
		s.mu.Lock()
		_, here := s.sessions[id]
		s.mu.Unlock()
		if here {
			return nil, errs.New(BadParams, fmt.Sprintf("session %q is already open on this connection; keep using it, or session/close it first", id))
		}
	}
	// One broken server of the editor's must not cost the person the
	// session, and the advice the mcp plugin gives (on_unavailable: skip)
	// is no setting an editor user has: the session opens without it, and
	// the editor is told which server and why (report).
	var down []unavailable
	for {
		o.Entries = entriesOf(mcp)
		var ss *sessions.Session
		var err error
		if kind == openNew {
			ss, err = s.opts.Sessions.Open(ctx, o)
		} else {
			ss, err = s.opts.Sessions.Resume(ctx, string(id), o)
		}
		if i, why, ok := failedServer(err, mcp); ok {
			s.log.Warn("an MCP server of the editor's did not start; the session opens without it", "server", mcp[i].Label, "error", why)
			down = append(down, unavailable{Label: mcp[i].Label, Name: mcp[i].Name, Why: why})
			mcp = append(mcp[:i:i], mcp[i+1:]...)
			continue
		}
		if err != nil {
			return nil, err
		}
		st, err := s.start(ss, kind, o.Workspace)
		if err != nil {
			return nil, errors.Join(err, ss.Detach(stdctx.Background()))
		}
		st.down = down
		return st, nil
	}
}

// start attaches to the session's hub, mounts the mode policy and starts
// the pump.
func (s *Server) start(ss *sessions.Session, kind openKind, cwd string) (*conv, error) {
	agent := ss.UnportedAgent()
	mode, err := mountMode(agent, s.opts.Mode)
	if err != nil {
		return nil, err
	}
	last := int64(agent.Session().Len())
	after := int64(0)
	if kind == openResume {
		// A resumed session shows only what happens from now on.
		after = last
	}
	tab, err := ss.Attach(s.ctx, sessions.AttachOptions{AfterSeq: after, Approvals: true, Name: "acp"})
	if err != nil {
		return nil, err
	}
	client := host.Live(tab)
	if client == nil {
		return nil, errors.Join(errs.New(errs.Internal, "acp: the session controller has no live hub"), tab.Detach(stdctx.Background()))
	}
	st := &conv{
		srv: s, id: acp.SessionId(ss.ID()), s: ss, tab: tab, mode: mode, cwd: cwd,
		turnOf: map[string]int{}, dropped: map[string]bool{}, ended: map[int]turnEnd{}, changed: make(chan struct{}), cancelled: make(chan struct{}),
		streamed: map[string]sent{}, announced: map[string]chan struct{}{}, questions: map[int64]stdctx.CancelFunc{}, askedBy: map[int64]uint64{},
		pumpDone: make(chan struct{}), forwarded: after, replayTo: last,
	}
	st.ctx, st.cancel = stdctx.WithCancel(s.ctx)
	if err := st.watchTools(); err != nil {
		st.cancel()
		return nil, errors.Join(err, tab.Detach(stdctx.Background()))
	}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		// The connection ended while the session opened: closeAll has run
		// and would never see it.
		s.mu.Unlock()
		st.cancel()
		return nil, errors.Join(errs.New(sessions.Closed, "acp: the client went away while its session opened"), tab.Detach(stdctx.Background()))
	}
	s.sessions[st.id] = st
	s.mu.Unlock()
	go st.pump(client)
	return st, nil
}

// waitForwarded waits until the pump has sent every durable event up to
// seq, or the session closes.
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
		}
	}
}

// notify wakes the waiters; st.mu is held.
func (st *conv) notifyLocked() {
	close(st.changed)
	st.changed = make(chan struct{})
}

// close detaches the server from the session, which closes it (the server
// is its only owner): the agent is disposed and the session flushed. A
// close that failed — the agent did not stop within ctx — leaves the
// session closing, and each later close tries again until one succeeds.
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
		st.mu.Lock()
		tab := st.tab
		st.mu.Unlock()
		st.closeErr = errors.Join(tab.Detach(ctx), st.s.Detach(ctx))
		if stuck {
			st.srv.log.Warn("the session closed while the client was not reading its updates", "session", st.id)
		}
	})
	st.retryMu.Lock()
	defer st.retryMu.Unlock()
	if !first && st.closeErr != nil {
		st.closeErr = st.s.Close(ctx)
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
