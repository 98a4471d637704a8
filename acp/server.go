package acp

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/google/uuid"
)

// SourceACP is the source kind of what an editor sends.
const SourceACP sessions.SourceKind = "acp"

// Options configure a Server.
type Options struct {
	// Sessions is the session service every session goes through; the
	// server closes the sessions it opens.
	Sessions sessions.Service
	// Agent is the configured agent (template) sessions are opened from.
	Agent string
	// Presets are mounted in each session's agent after the agent's own.
	Presets []string
	// Mode is the mode a new session starts in; default workspace-write.
	Mode string
	// Version is dsh's version, for agentInfo.
	Version string
	// MCP says the mcp plugin is compiled in: the client's mcpServers
	// become its entries in the session's agent. Without it they are
	// ignored with a warning.
	MCP bool
	// Accepts is what the configured agent's provider takes beyond text
	// (parts.Of on the provider and model): initialize advertises images
	// only when it takes them, and a prompt's image or document it cannot
	// take is refused before it is stored. Zero: text only.
	Accepts parts.Capabilities
	// User is the person the editor acts for (dsh acp passes the OS
	// user): each prompt's source names the editor as its principal and
	// User as whom it acts on behalf of. Zero: nobody named.
	User sessions.Principal
	// Log receives diagnostics (never stdout); nil discards them.
	Log *slog.Logger
	// CloseTimeout bounds closing each session at the end; default 10s.
	CloseTimeout time.Duration
	// ListPageSize is how many sessions a session/list answers at most;
	// a nextCursor then leads to the rest. Default DefaultListPageSize.
	ListPageSize int
}

// DefaultListPageSize is the page of a session/list: ACP lets the agent
// choose it, and an editor's session picker shows about this many before
// it scrolls.
const DefaultListPageSize = 50

// Server is the ACP agent of one connection.
type Server struct {
	opts Options
	conn *acp.AgentSideConnection
	// out is the connection's writer, shared with the SDK: the pump
	// writes text chunks to it directly (update.go).
	out *lockedWriter
	// connID scopes the connection's JSON-RPC ids.
	connID string
	log    *slog.Logger
	// ctx ends when the connection ends; the waits of prompts heed it.
	ctx    stdctx.Context
	cancel stdctx.CancelFunc

	mu       sync.Mutex
	sessions map[acp.SessionId]*conv
	// client is what the client offered in initialize; its fs
	// operations serve the file tools (files.go).
	client acp.ClientCapabilities
	// editor is the client's name from initialize ("editor" when it gave
	// none): the principal of its prompts.
	editor string
}

// Serve runs the ACP agent on in and out until in ends (the client went
// away) or ctx ends, then closes every session it opened: each agent is
// disposed and its session flushed. The error is the sessions' close
// errors, joined.
func Serve(ctx stdctx.Context, in io.Reader, out io.Writer, opts Options) error {
	if opts.Sessions == nil || opts.Agent == "" {
		return errs.New(errs.InvalidArgument, "acp.Serve: Options.Sessions and Options.Agent are required")
	}
	if opts.Mode == "" {
		opts.Mode = ModeWorkspaceWrite
	}
	if !validMode(opts.Mode) {
		return badMode(opts.Mode)
	}
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = 10 * time.Second
	}
	if opts.ListPageSize <= 0 {
		opts.ListPageSize = DefaultListPageSize
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, log: log, sessions: map[acp.SessionId]*conv{}, connID: uuid.NewString()}
	s.ctx, s.cancel = stdctx.WithCancel(stdctx.Background())
	defer s.cancel()

	w := &lockedWriter{w: out}
	s.out = w
	pr, pw := io.Pipe()
	// The SDK reads nothing before the filter writes: the connection and
	// its logger are set before any handler can run.
	s.conn = acp.NewAgentSideConnection(s, w, pr)
	s.conn.SetLogger(log)
	filtered := make(chan struct{})
	go func() {
		defer close(filtered)
		filter(in, pw, w, log)
	}()
	select {
	case <-s.conn.Done():
	case <-ctx.Done():
	}
	s.mu.Lock()
	s.cancel() // under mu: an open in progress either is in the map or sees it
	s.mu.Unlock()
	err := s.closeAll()
	// The filter ends with in; a ctx that ended first leaves it reading,
	// which the caller ends by closing in.
	_ = pr.Close()
	if ctx.Err() == nil {
		<-filtered
	}
	return err
}

// closeAll closes every session of the connection.
func (s *Server) closeAll() error {
	s.mu.Lock()
	all := make([]*conv, 0, len(s.sessions))
	for _, st := range s.sessions {
		all = append(all, st)
	}
	s.sessions = map[acp.SessionId]*conv{}
	s.mu.Unlock()
	var out []error
	for _, st := range all {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), s.opts.CloseTimeout)
		if err := st.close(ctx); err != nil {
			out = append(out, err)
		}
		cancel()
	}
	return errors.Join(out...)
}

func (s *Server) get(id acp.SessionId) (*conv, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.sessions[id]
	if !ok {
		return nil, unknownSession(id)
	}
	return st, nil
}

// Initialize negotiates: dsh speaks protocol version 1 and says so
// whatever the client asks (the client then decides), and advertises only
// what it does.
func (s *Server) Initialize(ctx stdctx.Context, p acp.InitializeRequest) (acp.InitializeResponse, error) {
	s.mu.Lock()
	s.client = p.ClientCapabilities
	s.editor = ""
	if p.ClientInfo != nil {
		s.editor = p.ClientInfo.Name
	}
	s.mu.Unlock()
	load, sessionCaps := s.sessionCapabilities(ctx)
	return acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "dsh", Title: acp.Ptr("dsh"), Version: s.opts.Version},
		AuthMethods:     []acp.AuthMethod{},
		AgentCapabilities: acp.AgentCapabilities{
			LoadSession: load,
			// Embedded resources every provider takes, text ones as
			// text files; images only a provider that takes them. A
			// blob the provider cannot take is refused at the prompt.
			PromptCapabilities:  acp.PromptCapabilities{EmbeddedContext: true, Image: s.opts.Accepts.Images},
			McpCapabilities:     acp.McpCapabilities{Http: s.opts.MCP},
			SessionCapabilities: sessionCaps,
			Meta:                map[string]any{"steering": map[string]any{"method": MethodSteering}},
		},
	}, nil
}

// Authenticate is never needed: dsh's providers hold their own keys, and
// initialize advertises no auth method. A request naming one is refused
// rather than answered as if it had authenticated: the method must be one
// the agent advertised.
func (s *Server) Authenticate(_ stdctx.Context, p acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, rpcErr(errs.New(BadParams, fmt.Sprintf(
		"authentication method %q was not advertised: dsh advertises none (its model providers hold their own keys), so there is nothing to authenticate", p.MethodId)))
}

// Logout has nothing to undo.
func (s *Server) Logout(stdctx.Context, acp.LogoutRequest) (acp.LogoutResponse, error) {
	return acp.LogoutResponse{}, nil
}

// SetSessionConfigOption: dsh advertises no config options.
func (s *Server) SetSessionConfigOption(_ stdctx.Context, p acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewInvalidParams(map[string]any{"details": "dsh advertises no session config options; use session/set_mode"})
}

// SetSessionMode switches the session's approval mode; the next tool call
// is decided by it.
func (s *Server) SetSessionMode(ctx stdctx.Context, p acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	st, err := s.get(p.SessionId)
	if err != nil {
		return acp.SetSessionModeResponse{}, rpcErr(err)
	}
	if !validMode(string(p.ModeId)) {
		return acp.SetSessionModeResponse{}, rpcErr(badMode(string(p.ModeId)))
	}
	if err := st.switchPlan(ctx, string(p.ModeId)); err != nil {
		return acp.SetSessionModeResponse{}, rpcErr(err)
	}
	st.mode.set(string(p.ModeId))
	st.send(acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: p.ModeId, SessionUpdate: "current_mode_update"}})
	return acp.SetSessionModeResponse{}, nil
}
