package serve

import (
	stdctx "context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/jobs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// DefaultShutdownTimeout is how long `dsh serve` lets turns finish at
// shutdown when serve.shutdown_timeout is not set.
const DefaultShutdownTimeout = 10 * time.Second

// closeGrace bounds the closing of sessions after the shutdown deadline:
// their turns are cancelled by then, so closing is flushing the logs.
const closeGrace = 10 * time.Second

// readTimeout bounds reading a request (a variable for the tests, which
// check that a stream outlives it: net/http lifts the deadline once a
// bodiless request is read).
var readTimeout = time.Minute

// Options configure a Server.
type Options struct {
	// Sessions is the session service every request goes through: the
	// host's controller, or a cluster's service that forwards a session's
	// calls to the host that runs it. The server uses nothing but its
	// interface.
	Sessions sessions.Service
	// Config gives the agents, presets and the serve: key (limits, CORS,
	// default agent).
	Config *config.Config
	// Token is the bearer token of principal DefaultTokenName; Tokens
	// are named ones (serve.tokens, see LoadTokens). Neither, and no JWT
	// issuer in the config's serve.jwt, only together with NoAuth.
	Token  string
	Tokens []Token
	NoAuth bool
	// JWKSClient fetches serve.jwt's key set; nil uses a client with a
	// 10s timeout.
	JWKSClient *http.Client
	// Hooks is mounted at /hooks/ without bearer auth (webhooks check
	// their HMAC) and without serve.max_body_bytes: it bounds its bodies
	// itself, as webhook.Handler does per webhook; nil answers 404 there.
	Hooks http.Handler
	// Log receives one line per request (never a header or a body);
	// nil discards.
	Log     *slog.Logger
	Version string
	// Metrics, when set, is served at GET /metrics behind the API's auth
	// (the Prometheus handler of telemetry.prometheus).
	Metrics http.Handler
	// Attachments gives the upload limit of a message's parts when its
	// limits differ from the config's attachments: key; nil uses the
	// config's.
	Attachments *attachments.Store
	// Jobs lists and kills the background jobs of the sessions this host
	// runs (jobs.Of(host.Root())); nil lists none.
	Jobs *jobs.Table
	// StreamBuffer is how many bytes an event stream may leave unread by
	// its client: past it the stream sends a drop message and ends, and
	// the client resumes with Last-Event-ID (0: DefaultStreamBuffer).
	// Read from the socket's send queue, on Linux, for streams of Serve.
	StreamBuffer int
	// StreamWriteTimeout is how long one write of a stream may block (a
	// client that reads nothing) before its connection is cut (0:
	// DefaultStreamWriteTimeout).
	StreamWriteTimeout time.Duration
}

// Server serves the HTTP API; see the package documentation.
type Server struct {
	o       Options
	cfg     config.ServeConfig
	log     *slog.Logger
	tokens  []tokenHash
	jwt     *jwtVerifier
	handler http.Handler
	mux     *http.ServeMux
	// routes are the API's patterns, which the OpenAPI test compares with
	// the document.
	routes []route

	stopping atomic.Bool
	// streams ends every SSE stream at shutdown: a stream is never idle,
	// so http.Server.Shutdown alone would wait for it forever.
	streams    stdctx.Context
	stopStream stdctx.CancelFunc
	// active counts the requests in flight, which Shutdown waits for
	// after the streams are told to end.
	active sync.WaitGroup

	mu      sync.Mutex
	servers []*http.Server
	held    map[string]*held // sessions opened here, by id
	closed  bool

	limits streamLimits
}

// New checks o and builds the server.
func New(o Options) (*Server, error) {
	switch {
	case o.Sessions == nil:
		return nil, errs.New(errs.InvalidArgument, "serve.New: Options.Sessions is nil; pass a session service: the host's controller (host.Sessions()) or a cluster's")
	case o.Config == nil:
		return nil, errs.New(errs.InvalidArgument, "serve.New: Options.Config is nil; pass the loaded config")
	case o.Token == "" && len(o.Tokens) == 0 && !o.Config.Serve.JWT.Enabled() && !o.NoAuth:
		return nil, errs.New(NoToken, "serve.New: no bearer token; set Options.Token or Options.Tokens, configure serve.jwt, or set NoAuth to serve without one (loopback only)")
	case (o.Token != "" || len(o.Tokens) > 0 || o.Config.Serve.JWT.Enabled()) && o.NoAuth:
		return nil, errs.New(errs.InvalidArgument, "serve.New: both tokens (or serve.jwt) and NoAuth are set; set one of them")
	}
	s := &Server{o: o, cfg: o.Config.Serve, log: o.Log, held: map[string]*held{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.cfg.MaxBodyBytes == 0 {
		s.cfg.MaxBodyBytes = config.DefaultMaxBody
	}
	if s.cfg.ShutdownTimeout == 0 {
		s.cfg.ShutdownTimeout = DefaultShutdownTimeout
	}
	s.limits = streamLimits{buffer: o.StreamBuffer, timeout: o.StreamWriteTimeout}
	if s.limits.buffer <= 0 {
		s.limits.buffer = DefaultStreamBuffer
	}
	if s.limits.timeout <= 0 {
		s.limits.timeout = DefaultStreamWriteTimeout
	}
	tokens := o.Tokens
	if o.Token != "" {
		tokens = append([]Token{{Name: DefaultTokenName, Secret: o.Token}}, tokens...)
	}
	for _, t := range tokens {
		if t.Name == "" || t.Secret == "" {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("serve.New: a token has no name or no secret (name %q); every token names its principal and holds a secret", t.Name))
		}
		if t.Tenant != "" {
			if err := session.CheckTenant(t.Tenant); err != nil {
				return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("serve.New: the tenant of token %q cannot be used: %v; name it with at most %d printable characters", t.Name, err, session.MaxTenantLen))
			}
		}
		s.tokens = append(s.tokens, tokenHash{name: t.Name, tenant: t.Tenant, sum: sha256.Sum256([]byte(t.Secret))})
	}
	if !o.NoAuth {
		s.statePrincipals(tokens)
	}
	s.streams, s.stopStream = stdctx.WithCancel(stdctx.Background())
	if j := o.Config.Serve.JWT; j.Enabled() && !o.NoAuth {
		v, err := newJWTVerifier(s.streams, j, o.JWKSClient, s.log)
		if err != nil {
			s.stopStream()
			return nil, err
		}
		s.jwt = v
	}
	s.handler = s.build()
	return s, nil
}

// Handler returns the whole API, auth included.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves on l until Shutdown, then returns http.ErrServerClosed. A
// server without a token refuses to serve on a listener that is not
// loopback.
func (s *Server) Serve(l net.Listener) error {
	if s.o.NoAuth && !isLoopback(l.Addr()) {
		return errs.New(NoToken, fmt.Sprintf("serving without a token is allowed only on a loopback address, and the listener is %s; set a token (serve.token_env or serve.token_file)", l.Addr()))
	}
	hs := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       readTimeout,
		// No WriteTimeout: it would cut every SSE stream; a stream pings
		// and ends when its client goes.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		// A stream reads its socket's send queue to bound what its
		// client leaves unread.
		ConnContext: func(ctx stdctx.Context, c net.Conn) stdctx.Context { return stdctx.WithValue(ctx, connKey{}, c) },
		ErrorLog:    slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.servers = append(s.servers, hs)
	s.mu.Unlock()
	return hs.Serve(l)
}

func isLoopback(a net.Addr) bool {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

// Shutdown stops taking requests (new ones get 503 SERVE_SHUTTING_DOWN),
// ends the streams, lets the running turns of the sessions it holds finish
// until ctx's deadline, then cancels them, and closes those sessions,
// which flushes them to the store. It returns once the requests in flight
// are done.
//
// The sessions it holds are the ones it opened or adopted: a session
// another entry point opened (a webhook's, a schedule's) is that entry
// point's to drain and the host's to close, and on a cluster a session
// that moved to another host is not this server's to stop.
func (s *Server) Shutdown(ctx stdctx.Context) error {
	s.stopping.Store(true)
	s.stopStream()
	s.mu.Lock()
	s.closed = true
	servers := s.servers
	var open []string
	for id, h := range s.held {
		// An approver whose stream ended followed a copy that closed
		// under the server: the session runs elsewhere, or nowhere.
		if !h.approver.ended() {
			open = append(open, id)
		}
	}
	s.mu.Unlock()
	slices.Sort(open)

	var failed []error
	httpDone := make(chan error, len(servers))
	for _, hs := range servers {
		go func() { httpDone <- hs.Shutdown(ctx) }()
	}

	var finished atomic.Bool
	finished.Store(true)
	var wg sync.WaitGroup
	for _, id := range open {
		wg.Go(func() {
			if err := s.o.Sessions.Idle(ctx, id); err != nil && !errs.HasCode(err, sessions.NotFound) {
				finished.Store(false)
			}
		})
	}
	wg.Wait()
	closeCtx, cancel := stdctx.WithTimeout(stdctx.WithoutCancel(ctx), closeGrace)
	defer cancel()
	if !finished.Load() {
		s.log.Warn("turns still ran at the shutdown deadline; cancelling them")
		for _, id := range open {
			wg.Go(func() { _ = s.o.Sessions.Cancel(closeCtx, id) })
		}
		wg.Wait()
	}
	s.mu.Lock()
	holds := s.held
	s.held = map[string]*held{}
	s.mu.Unlock()
	for _, h := range holds {
		h.approver.stop()
	}
	for _, id := range open {
		if err := s.o.Sessions.Close(closeCtx, id); err != nil && !errs.HasCode(err, sessions.NotFound) {
			failed = append(failed, fmt.Errorf("closing session %q: %w", id, err))
		}
	}
	for range servers {
		if err := <-httpDone; err != nil {
			failed = append(failed, err)
			for _, hs := range servers {
				hs.Close()
			}
		}
	}
	idle := make(chan struct{})
	go func() { s.active.Wait(); close(idle) }()
	select {
	case <-idle:
	case <-closeCtx.Done():
		failed = append(failed, errs.New(errs.Internal, "serve: requests were still in flight when the shutdown ended"))
	}
	return errors.Join(failed...)
}

// Adopt makes the server keep session id, open in its session service,
// though it did not open it: it answers the session's approvals and closes
// it at shutdown, as it does for its own. A cluster calls it
// (cluster.Options.Claimed) for a session it resumed on this host for a
// message the API routed. The session's approver is attached afresh, so a
// copy of the session that a cluster closed under the server and resumed
// again is answered too; a session the server cannot keep is closed again.
func (s *Server) Adopt(id string) error { return s.hold(id) }
