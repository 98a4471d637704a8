package egress

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"sync"
	"time"
)

// Options bound and label a Proxy. Zero fields take the defaults below.
type Options struct {
	// Agent names the agent whose commands use the proxy; refusals carry
	// it in the log line and the Refusal record.
	Agent string
	// Logger receives one Warn line per refusal (default slog.Default()).
	Logger *slog.Logger
	// OnRefusal, when set, is called once per refused request, from the
	// request's goroutine; it must not block for long.
	OnRefusal func(Refusal)
	// Resolver looks names up (default net.DefaultResolver).
	Resolver Resolver
	// DialTimeout bounds connecting to one target, all its addresses
	// tried in turn (default 10s).
	DialTimeout time.Duration
	// HeaderTimeout bounds reading a request's header (default 10s).
	HeaderTimeout time.Duration
	// IdleTimeout closes a client connection with no request in flight
	// after this long (default 90s).
	IdleTimeout time.Duration
	// TunnelIdleTimeout closes a CONNECT tunnel in which no byte moved
	// either way for this long (default 5m).
	TunnelIdleTimeout time.Duration
	// MaxHeaderBytes caps a request's header (default 32 KiB).
	MaxHeaderBytes int
	// MaxConns caps the client connections open at once, tunnels
	// included; further clients wait in the listen backlog (default 64).
	MaxConns int
}

func (o *Options) fill() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&o.DialTimeout, 10*time.Second)
	def(&o.HeaderTimeout, 10*time.Second)
	def(&o.IdleTimeout, 90*time.Second)
	def(&o.TunnelIdleTimeout, 5*time.Minute)
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = 32 << 10
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 64
	}
}

// Proxy is the HTTP/1.1 forward proxy that enforces a Policy. It is safe
// for concurrent use; one Proxy may serve several listeners.
type Proxy struct {
	policy Policy
	opts   Options
	srv    *http.Server
	fwd    *httputil.ReverseProxy
	tr     *http.Transport
	sem    chan struct{} // one slot per open client connection

	// ctx is the parent of every request's context; Close cancels it so
	// upstream requests and dials stop with the proxy.
	ctx    context.Context
	cancel context.CancelFunc

	mu      sync.Mutex
	closed  bool
	serving int // Serve calls running
	conns   map[*clientConn]struct{}
	work    sync.WaitGroup // requests and tunnels in flight
}

// New returns a proxy that enforces policy. It serves nothing until Serve.
func New(policy Policy, opts Options) *Proxy {
	opts.fill()
	// The proxy keeps its own lists: a caller changing its slices later
	// does not change what a running proxy allows.
	policy.Allow = slices.Clone(policy.Allow)
	policy.Deny = slices.Clone(policy.Deny)
	p := &Proxy{
		policy: policy,
		opts:   opts,
		sem:    make(chan struct{}, opts.MaxConns),
		conns:  map[*clientConn]struct{}{},
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.tr = p.newTransport()
	p.fwd = p.newForwarder()
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: opts.HeaderTimeout,
		IdleTimeout:       opts.IdleTimeout,
		MaxHeaderBytes:    opts.MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return p.ctx },
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
		// net/http logs malformed requests and broken clients; those are
		// the client's problem and already answered with 400.
		ErrorLog: slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
	}
	return p
}

// Serve answers proxy requests on l until l is closed or Close is called,
// then ends every connection it accepted from l (tunnels included), waits
// for their requests and returns nil. A proxy may serve several listeners
// at once, one per sandboxed command, say: closing one ends only what came
// through it.
func (p *Proxy) Serve(l net.Listener) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return nil
	}
	p.serving++
	p.mu.Unlock()
	ll := newLimitListener(p, l)
	err := p.srv.Serve(ll)
	ll.shut()
	p.mu.Lock()
	p.serving--
	idle := p.serving == 0
	p.mu.Unlock()
	if idle {
		// Kept-alive upstream connections hold goroutines; with no
		// command left to use them they go now, not after IdleTimeout.
		p.tr.CloseIdleConnections()
	}
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// Close stops every listener, closes every client connection and tunnel,
// and returns once no request of the proxy is running any more.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	conns := make([]*clientConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()

	p.cancel()
	err := p.srv.Close()
	// Hijacked connections (tunnels, refusals) are no longer the
	// server's; closing them here ends their copy loops.
	for _, c := range conns {
		c.Close()
	}
	p.work.Wait()
	p.tr.CloseIdleConnections()
	return err
}

// enter registers a request in flight with the proxy and the listener
// its connection came from; false once either is closed.
func (p *Proxy) enter(cc *clientConn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || (cc != nil && cc.l.closed) {
		return false
	}
	p.work.Add(1)
	if cc != nil {
		cc.l.work.Add(1)
	}
	return true
}

func (p *Proxy) leave(cc *clientConn) {
	if cc != nil {
		cc.l.work.Done()
	}
	p.work.Done()
}

type connKey struct{}

// ServeHTTP dispatches one request: CONNECT is tunnelled, an absolute-form
// request forwarded, anything else refused as not a proxy request.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	cc, _ := r.Context().Value(connKey{}).(*clientConn)
	if !p.enter(cc) {
		http.Error(w, "dsh egress proxy: shutting down", http.StatusServiceUnavailable)
		return
	}
	defer p.leave(cc)
	switch {
	case r.Method == http.MethodConnect:
		p.connect(w, r)
	case r.URL.IsAbs():
		p.forward(w, r)
	default:
		p.badRequest(w, "dsh egress proxy: this is an HTTP proxy; send absolute-form requests (GET http://host/path) or CONNECT host:port, as clients do when HTTP_PROXY and HTTPS_PROXY point here")
	}
}
