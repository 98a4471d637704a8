package mcp

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/trace"
	"slices"
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// server supervises one configured MCP server: it connects, keeps the
// tools registry in step with the server's list, and restarts it when it
// goes away.
type server struct {
	cfg    Config
	log    hclog.Logger
	ctx    *dshctx.Context
	svc    *tools.Service
	client *mcpsdk.Client
	// changed is signalled by notifications/tools/list_changed.
	changed chan struct{}

	mu   sync.Mutex
	cur  *conn  // nil while the server is down
	down string // why it is down, for the results of calls meanwhile
	// noted is what noteFeatures last said, so a restart or a sync does
	// not say it again.
	noted string
	// instructions are the server's, from its last handshake, for the
	// system prompt.
	instructions string

	// syncMu serializes the syncs of the registry: the supervisor's (on
	// start and on a notification) and the one after each call.
	syncMu sync.Mutex
	// tools are the registered tools by the server's own names; syncMu
	// guards them.
	tools map[string]*remote
}

// remote is one registered tool: its definition as last listed, and the
// fiber that holds its registration (disposing it unregisters the tool).
type remote struct {
	def   []byte
	fiber *dshctx.Fiber
}

func newServer(ctx *dshctx.Context, svc *tools.Service, cfg Config) *server {
	s := &server{cfg: cfg, ctx: ctx, svc: svc, log: ctx.Logger().With("mcp_server", cfg.Name),
		changed: make(chan struct{}, 1), tools: map[string]*remote{}, down: "it has not started yet"}
	s.client = mcpsdk.NewClient(&mcpsdk.Implementation{Name: "dsh", Version: "1"}, &mcpsdk.ClientOptions{
		// No roots: dsh does not offer the server its files.
		Capabilities: &mcpsdk.ClientCapabilities{},
		ToolListChangedHandler: func(stdctx.Context, *mcpsdk.ToolListChangedRequest) {
			select {
			case s.changed <- struct{}{}:
			default: // a sync is pending already; it will list the latest
			}
		},
	})
	return s
}

// run connects and reconnects until ctx ends. The first attempt's outcome
// goes to first, so the plugin's apply can fail or go on without it.
func (s *server) run(ctx stdctx.Context, first chan<- error) {
	backoff := s.cfg.RestartBackoff
	for attempt := 0; ; attempt++ {
		c, err := s.start(ctx)
		if attempt == 0 {
			first <- err
			if err != nil && s.cfg.OnUnavailable == Fail {
				return
			}
		} else if err != nil && ctx.Err() == nil {
			s.log.Warn("MCP server did not start again; retrying", "in", backoff, "error", err)
		}
		var up time.Duration
		if err == nil {
			s.serve(ctx, c)
			up = time.Since(c.since)
			backoff = s.cfg.wait(backoff, up)
			if ctx.Err() == nil {
				s.log.Warn("MCP server went away; restarting it", "in", backoff, "stderr_tail", c.stderr())
			}
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			s.unregisterAll()
			return
		case <-timer.C:
		}
		if err != nil {
			backoff = s.cfg.wait(2*backoff, 0)
		} else {
			backoff = s.cfg.wait(2*backoff, up)
		}
	}
}

// wait is the pause before the next start: next, capped at
// restart_backoff_max, or restart_backoff again when the server was up
// for restart_stable (a crash after a long good run is not a crash loop).
func (c Config) wait(next, up time.Duration) time.Duration {
	if up >= c.RestartStable {
		return c.RestartBackoff
	}
	return min(next, c.RestartBackoffMax)
}

// start connects and registers the server's tools.
func (s *server) start(ctx stdctx.Context) (*conn, error) {
	c, err := s.connect(ctx)
	if err != nil {
		s.mu.Lock()
		s.down = "its last start failed: " + strings.SplitN(err.Error(), "\n", 2)[0]
		s.mu.Unlock()
		return nil, withTail(err, c)
	}
	// Live before its tools are registered, so a call of a tool the
	// moment it appears finds the connection.
	s.mu.Lock()
	s.cur, s.down = c, ""
	s.mu.Unlock()
	s.noteInstructions(c)
	lctx, cancel := stdctx.WithTimeout(ctx, s.cfg.StartTimeout)
	defer cancel()
	if err := s.sync(lctx, c); err != nil {
		s.lost(c, "listing its tools failed")
		c.close()
		return nil, withTail(fmt.Errorf("listing its tools: %w", err), c)
	}
	return c, nil
}

// withTail adds the server's stderr tail to why it did not start.
func withTail(err error, c *conn) error {
	if c != nil {
		if t := c.stderr(); t != "" {
			return fmt.Errorf("%w; its stderr ends with:\n%s", err, t)
		}
	}
	return err
}

// serve follows one connection until it ends or ctx does.
func (s *server) serve(ctx stdctx.Context, c *conn) {
	ended := make(chan struct{})
	go func() {
		_ = c.sess.Wait()
		close(ended)
	}()
	for {
		select {
		case <-ended:
			s.lost(c, "it disconnected")
			c.close()
			return
		case <-ctx.Done():
			s.lost(c, "dsh is stopping it")
			c.close()
			<-ended
			return
		case <-s.changed:
			lctx, cancel := stdctx.WithTimeout(ctx, s.cfg.StartTimeout)
			if err := s.sync(lctx, c); err != nil {
				s.log.Warn("could not list the MCP server's tools after it said they changed", "error", err)
			}
			cancel()
		}
	}
}

func (s *server) lost(c *conn, why string) {
	s.mu.Lock()
	if s.cur == c {
		s.cur, s.down = nil, why
	}
	s.mu.Unlock()
}

// sync lists the server's tools and brings the registry in step: new
// tools are registered, removed ones unregistered, changed ones replaced.
func (s *server) sync(ctx stdctx.Context, c *conn) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	var list []*mcpsdk.Tool
	caps := capsOf(c)
	s.noteFeatures(caps)
	// A server that declares no tools is not asked for them: the spec has
	// a client use only what the server declared, and servers built with
	// the TypeScript SDK answer tools/list of such a server "method not
	// found", which would keep it from starting.
	if caps.Tools != nil {
		for t, err := range c.sess.Tools(ctx, nil) {
			if err != nil {
				return err
			}
			list = append(list, t)
		}
	}
	seen := map[string]bool{}
	for _, t := range list {
		seen[t.Name] = true
		def, _ := json.Marshal(t)
		old := s.tools[t.Name]
		if old != nil && string(old.def) == string(def) {
			continue
		}
		if old != nil {
			_ = old.fiber.Dispose(stdctx.Background())
			delete(s.tools, t.Name)
		}
		f, err := s.register(t)
		if err != nil {
			s.log.Warn("an MCP tool was left out", "tool", t.Name, "error", err)
			continue
		}
		s.tools[t.Name] = &remote{def: def, fiber: f}
	}
	for name, r := range s.tools {
		if !seen[name] {
			_ = r.fiber.Dispose(stdctx.Background())
			delete(s.tools, name)
		}
	}
	return nil
}

// capsOf is what the server declared at the handshake; none when it
// declared nothing.
func capsOf(c *conn) *mcpsdk.ServerCapabilities {
	if r := c.sess.InitializeResult(); r != nil && r.Capabilities != nil {
		return r.Capabilities
	}
	return &mcpsdk.ServerCapabilities{}
}

// noteFeatures says, once per server, what it offers that dsh does not
// use: dsh takes an MCP server's tools only, so resources and prompts
// (which Claude Code offers as @-mentions and /commands) reach neither the
// person nor the model, and a server without tools adds nothing.
func (s *server) noteFeatures(caps *mcpsdk.ServerCapabilities) {
	var unused []string
	if caps.Resources != nil {
		unused = append(unused, "resources")
	}
	if caps.Prompts != nil {
		unused = append(unused, "prompts")
	}
	note := strings.Join(unused, ", ")
	if caps.Tools == nil {
		note += " no tools"
	}
	s.mu.Lock()
	same := s.noted == note
	s.noted = note
	s.mu.Unlock()
	if same {
		return
	}
	if len(unused) > 0 {
		s.log.Warn(fmt.Sprintf("the MCP server offers %s, which dsh does not use: only MCP tools reach the model (no @-mentions of resources, no prompts as commands)", strings.Join(unused, " and ")))
	}
	if caps.Tools == nil {
		s.log.Warn("the MCP server declares no tools, and dsh uses only an MCP server's tools: it adds nothing to the agent")
	}
}

func (s *server) unregisterAll() {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	for name, r := range s.tools {
		_ = r.fiber.Dispose(stdctx.Background())
		delete(s.tools, name)
	}
}

// toolFiber holds one tool's registration in a fiber of its own, so one
// tool can leave without the others.
type toolFiber struct{ t tools.Tool }

func (f toolFiber) Name() string { return "mcp tool " + f.t.Name }

func (toolFiber) Inject() []dshctx.ServiceKey { return []dshctx.ServiceKey{tools.Key} }

func (f toolFiber) Apply(ctx *dshctx.Context, _ any) error {
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return err
	}
	return svc.Register(ctx, f.t)
}

func (s *server) register(t *mcpsdk.Tool) (*dshctx.Fiber, error) {
	tl, err := s.tool(t)
	if err != nil {
		return nil, err
	}
	f, err := s.ctx.Plugin(toolFiber{tl}, nil)
	if err != nil {
		return nil, err
	}
	if err := f.Await(stdctx.Background()); err != nil {
		_ = f.Dispose(stdctx.Background())
		return nil, err
	}
	return f, nil
}

// tool is the dsh tool for the server's tool t. readOnlyHint makes it
// parallel-safe and allowed; any other tool asks, as peer harnesses do
// for MCP tools, unless approval: in the config says otherwise.
func (s *server) tool(t *mcpsdk.Tool) (tools.Tool, error) {
	params, err := json.Marshal(t.InputSchema)
	if err != nil {
		return tools.Tool{}, fmt.Errorf("its input schema is not JSON: %w", err)
	}
	if string(params) == "null" {
		params = []byte(`{"type":"object"}`)
	}
	readOnly := t.Annotations != nil && t.Annotations.ReadOnlyHint
	approval := tools.Ask
	if readOnly {
		approval = tools.Allow
	}
	if s.cfg.Approval != "" {
		approval = tools.Decision(s.cfg.Approval)
	}
	desc := t.Description
	if desc == "" && t.Annotations != nil {
		desc = t.Annotations.Title
	}
	name := t.Name
	return tools.Tool{
		Name:         toolName(s.cfg.Name, t.Name),
		Description:  desc,
		Parameters:   params,
		ParallelSafe: readOnly || slices.Contains(s.cfg.ParallelSafe, t.Name) || slices.Contains(s.cfg.ParallelSafe, "*"),
		Approval:     approval,
		// Only a tool the server marks read-only runs in plan mode.
		ReadOnly: readOnly,
		Execute: func(ctx stdctx.Context, c tools.Call) (tools.Result, error) {
			return s.call(ctx, name, readOnly, c)
		},
	}, nil
}

// call runs the server's tool name. Everything the model can act on —
// the server down, a timeout, a disconnect, the server's own error — is
// an error result naming the server; only the end of ctx is a Go error.
func (s *server) call(ctx stdctx.Context, name string, readOnly bool, c tools.Call) (tools.Result, error) {
	s.mu.Lock()
	cur, down := s.cur, s.down
	s.mu.Unlock()
	if cur == nil {
		return failed("MCP server %q is not connected (%s), so %q did not run; dsh restarts it: try again in a moment", s.cfg.Name, down, name), nil
	}
	params := &mcpsdk.CallToolParams{Name: name, Arguments: c.Arguments}
	if telemetry.Enabled() {
		var span trace.Span
		ctx, span = s.startSpan(ctx, name, params)
		defer span.End()
	}
	cctx, cancel := stdctx.WithTimeout(ctx, s.cfg.CallTimeout)
	defer cancel()
	res, err := cur.sess.CallTool(cctx, params)
	if err != nil {
		telemetry.RecordError(trace.SpanFromContext(ctx), err)
	}
	switch {
	case err == nil:
		s.catchUp(ctx, cur, readOnly)
		return result(res, s.cfg.MaxResultBytes, resultLimits), nil
	case ctx.Err() != nil:
		return tools.Result{}, ctx.Err()
	case cctx.Err() != nil:
		return failed("the call of %q on MCP server %q timed out after %s (call_timeout) and was cancelled", name, s.cfg.Name, s.cfg.CallTimeout), nil
	}
	if r, ok := s.unreachable(name, err); ok {
		return r, nil
	}
	switch {
	case errors.Is(err, mcpsdk.ErrConnectionClosed) || s.gone(cur):
		return failed("MCP server %q went away during the call of %q (%v); it may or may not have taken effect. dsh restarts the server: check, then try again", s.cfg.Name, name, err), nil
	default:
		return failed("MCP server %q answered the call of %q with an error: %v", s.cfg.Name, name, err), nil
	}
}

// resultLimits bound the images of one result: the attachments store's
// defaults, as for the file tool's images (the plugin does not depend on
// the store; one configured lower refuses the images, and the agent loop
// says so in the result).
var resultLimits = attachments.Limits{PerPart: attachments.DefaultPerPart, PerMessage: attachments.DefaultPerMessage}

// gone reports whether c is no longer the live connection.
func (s *server) gone(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur != c
}

func failed(format string, args ...any) tools.Result {
	return tools.Result{Content: fmt.Sprintf(format, args...), IsError: true}
}
