package mcp

import (
	stdctx "context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/dsh-go/dsh/internal/childproc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// stopGrace is how long a stdio server gets after SIGTERM (and again
// after SIGKILL) before dsh stops waiting for it.
const stopGrace = 2 * time.Second

// conn is one connection to the server: a session, and the process or
// HTTP transport behind it.
type conn struct {
	sess  *mcpsdk.ClientSession
	proc  *childproc.Proc
	http  *http.Transport
	tail  *tail
	since time.Time
}

// close ends the session and tears the process group down, bounded.
func (c *conn) close() {
	if c.sess != nil {
		_ = c.sess.Close()
	}
	if c.proc != nil {
		c.proc.Stop(stopGrace)
	}
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
}

// stderr is the server's stderr tail, or "" (HTTP servers have none).
func (c *conn) stderr() string {
	if c.tail == nil {
		return ""
	}
	return c.tail.String()
}

// open makes the transport of one connection attempt; for a stdio server
// it starts the process, through childproc like every child of dsh.
func (s *server) open(c *conn) (mcpsdk.Transport, error) {
	switch {
	case s.cfg.transport != nil:
		return s.cfg.transport()
	case s.cfg.Command != "":
		return s.startProcess(c)
	default:
		return s.httpTransport(c)
	}
}

func (s *server) startProcess(c *conn) (mcpsdk.Transport, error) {
	p, err := childproc.New(childproc.Spec{
		Path: s.cfg.Command, Args: s.cfg.Args, Dir: s.cfg.Cwd,
		Env: s.cfg.Env, Passthrough: s.cfg.EnvPassthrough,
		// Servers are long-lived and often wrappers (npx, uvx) whose
		// children would outlive a SIGKILLed dsh.
		Guard: true,
	})
	if err != nil {
		return nil, err
	}
	c.tail = &tail{line: func(l string) { s.log.Debug("stderr", "line", l) }}
	inW, outR, err := p.StartPiped(c.tail, stopGrace)
	if err != nil {
		return nil, err
	}
	c.proc = p
	limit := s.cfg.MaxMessageBytes
	out := newFrameCap(outR, limit, func(n int, answered bool) {
		s.log.Warn("an MCP server message over max_message_bytes was dropped; the server keeps running", "bytes", n, "limit", limit, "answered_as_error", answered)
	})
	// The SDK's own cap stays as a backstop above ours, which no line
	// passes.
	return &mcpsdk.IOTransport{Reader: out, Writer: inW, MaxLineLength: limit + 64<<10}, nil
}

func (s *server) httpTransport(c *conn) (mcpsdk.Transport, error) {
	token := ""
	if s.cfg.BearerTokenEnv != "" {
		token = os.Getenv(s.cfg.BearerTokenEnv)
		if token == "" {
			return nil, fmt.Errorf("bearer_token_env names %s, which is not set in dsh's environment; export it or remove bearer_token_env", s.cfg.BearerTokenEnv)
		}
	}
	c.http = http.DefaultTransport.(*http.Transport).Clone()
	rt := &withHeaders{base: c.http, headers: s.cfg.Headers, token: token}
	return &mcpsdk.StreamableClientTransport{Endpoint: s.cfg.URL, HTTPClient: &http.Client{Transport: rt}}, nil
}

// withHeaders adds the configured headers and the bearer token to every
// request of one server.
type withHeaders struct {
	base    http.RoundTripper
	headers map[string]string
	token   string
}

func (w *withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range w.headers {
		r.Header.Set(k, v)
	}
	if w.token != "" {
		r.Header.Set("Authorization", "Bearer "+w.token)
	}
	return w.base.RoundTrip(r)
}

// connect opens a connection and completes the handshake within
// start_timeout. On failure the connection is closed already and comes
// back for its stderr tail.
func (s *server) connect(ctx stdctx.Context) (*conn, error) {
	ctx, cancel := stdctx.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	c := &conn{since: time.Now()}
	t, err := s.open(c)
	if err != nil {
		c.close()
		return c, err
	}
	done := make(chan struct{})
	var sess *mcpsdk.ClientSession
	go func() {
		defer close(done)
		sess, err = s.client.Connect(ctx, t, nil)
	}()
	// A process that exits before answering is reported at once, not
	// after the whole start_timeout.
	var exited <-chan struct{}
	if c.proc != nil {
		exited = c.proc.Done()
	}
	select {
	case <-done:
	case <-exited:
		cancel()
		<-done
		if err == nil {
			sess.Close()
			err = errors.New("the process exited")
		}
	}
	if err != nil {
		c.close()
		// A process that exited on its own says more than the broken
		// pipe it left behind.
		var exit *exec.ExitError
		if c.proc != nil && errors.As(c.proc.Err(), &exit) && exit.Exited() {
			return c, fmt.Errorf("the process exited before completing the MCP handshake (%v)", exit)
		}
		if ctx.Err() == stdctx.DeadlineExceeded {
			return c, fmt.Errorf("no MCP handshake within start_timeout (%s)", s.cfg.StartTimeout)
		}
		var op *net.OpError
		if s.cfg.URL != "" && errors.As(err, &op) && op.Op == "dial" {
			return c, fmt.Errorf("it could not be reached at %s (%v); check that the server is running at that address", s.cfg.URL, op.Err)
		}
		return c, err
	}
	c.sess = sess
	return c, nil
}
