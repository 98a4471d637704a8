package acp_test

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	dshacp "github.com/dsh-go/dsh/acp"
	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/plugins/llm/parts"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait of the tests.
const wait = 10 * time.Second

// gate is the tool "gate": it returns "opened" when the test opens it, or
// when its call is cancelled.
var gate = struct {
	mu      sync.Mutex
	open    chan struct{}
	started chan string
}{}

func resetGate() {
	gate.mu.Lock()
	gate.open, gate.started = make(chan struct{}), make(chan string, 16)
	gate.mu.Unlock()
}

func openGate() {
	gate.mu.Lock()
	close(gate.open)
	gate.mu.Unlock()
}

type noConfig struct{}

// stubborn is the state of the tool "stubborn"; a test that uses it makes
// the channels first.
var stubborn struct {
	started chan struct{}
	release chan struct{}
}

func init() {
	plugin.Register("test.gate", "a tool that waits for the test (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name: "gate", Description: "waits", Parameters: json.RawMessage(`{"type":"object"}`),
			Execute: func(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
				gate.mu.Lock()
				open, started := gate.open, gate.started
				gate.mu.Unlock()
				started <- call.ID
				select {
				case <-open:
					return tools.Result{Content: "opened"}, nil
				case <-ctx.Done():
					return tools.Result{Content: "cancelled", IsError: true}, nil
				}
			},
		})
	}, tools.Key)
	// test.stubborn registers "stubborn", a tool that ignores its
	// cancellation and returns only when the test releases it.
	plugin.Register("test.stubborn", "a tool that ignores cancel (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name: "stubborn", Description: "ignores cancel", Parameters: json.RawMessage(`{"type":"object"}`),
			Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
				stubborn.started <- struct{}{}
				<-stubborn.release
				return tools.Result{Content: "released"}, nil
			},
		})
	}, tools.Key)
	// test.refuse refuses every prompt that says "forbidden".
	plugin.Register("test.refuse", "refuses prompts saying forbidden (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		_, err := agentcontroller.EventAdmission.On(ctx, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			if strings.Contains(a.Message.Content, "forbidden") {
				return agentcontroller.Reject("test/forbidden", "prompts saying forbidden are refused here", false), nil
			}
			return next.Call(ctx, a)
		})
		return err
	})
}

// client is the editor: the SDK's client side, recording updates and
// answering permission requests from perms.
type client struct {
	mu      sync.Mutex
	updates []acp.SessionNotification
	changed chan struct{}
	asked   chan acp.RequestPermissionRequest
	answers chan acp.RequestPermissionOutcome
	// permCtxDone is told when a pending request's ctx ended (cancelled by
	// the agent).
	permCtxDone chan struct{}
	// buffers, when set, are the editor's open files (path → text), which
	// fs/read_text_file serves and fs/write_text_file changes.
	buffers map[string]string
}

func newClient() *client {
	return &client{changed: make(chan struct{}), asked: make(chan acp.RequestPermissionRequest, 8),
		answers: make(chan acp.RequestPermissionOutcome, 8), permCtxDone: make(chan struct{}, 8)}
}

func (c *client) SessionUpdate(_ stdctx.Context, n acp.SessionNotification) error {
	c.mu.Lock()
	c.updates = append(c.updates, n)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
	return nil
}

func (c *client) RequestPermission(ctx stdctx.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	c.asked <- p
	select {
	case o := <-c.answers:
		return acp.RequestPermissionResponse{Outcome: o}, nil
	case <-ctx.Done():
		c.permCtxDone <- struct{}{}
		return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
	}
}

func (c *client) ReadTextFile(_ stdctx.Context, r acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if text, ok := c.buffers[r.Path]; ok {
		return acp.ReadTextFileResponse{Content: text}, nil
	}
	return acp.ReadTextFileResponse{}, errors.New("not open")
}
func (c *client) WriteTextFile(_ stdctx.Context, r acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buffers == nil {
		return acp.WriteTextFileResponse{}, errors.New("not offered")
	}
	c.buffers[r.Path] = r.Content
	return acp.WriteTextFileResponse{}, nil
}
func (c *client) CreateTerminal(stdctx.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errors.New("not offered")
}
func (c *client) KillTerminal(stdctx.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errors.New("not offered")
}
func (c *client) TerminalOutput(stdctx.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errors.New("not offered")
}
func (c *client) ReleaseTerminal(stdctx.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errors.New("not offered")
}
func (c *client) WaitForTerminalExit(stdctx.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errors.New("not offered")
}

// all returns the updates received so far.
func (c *client) all() []acp.SessionNotification {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]acp.SessionNotification(nil), c.updates...)
}

// waitFor waits until an update satisfies ok and returns it.
func (c *client) waitFor(t *testing.T, what string, ok func(acp.SessionUpdate) bool) acp.SessionUpdate {
	t.Helper()
	deadline := time.After(wait)
	for {
		c.mu.Lock()
		for _, n := range c.updates {
			if ok(n.Update) {
				c.mu.Unlock()
				return n.Update
			}
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("no %s among %d updates: %s", what, len(c.all()), dump(c.all()))
		}
	}
}

func dump(ns []acp.SessionNotification) string {
	b, _ := json.Marshal(ns)
	return string(b)
}

// text is the agent's message text among the updates.
func agentText(ns []acp.SessionNotification) string {
	var b strings.Builder
	for _, n := range ns {
		if u := n.Update.AgentMessageChunk; u != nil && u.Content.Text != nil {
			b.WriteString(u.Content.Text.Text)
		}
	}
	return b.String()
}

// env is a host, a server on pipes and a client connected to it.
type env struct {
	t      *testing.T
	h      *host.Host
	c      *client
	conn   *acp.ClientSideConnection
	stdin  *io.PipeWriter
	served chan error
	dir    string
	store  string
}

type envOpts struct {
	replies []scripted.Reply
	mode    string
	presets []string
	extra   string // YAML plugin entries
	store   string // session directory to share between envs
	agent   string // YAML keys added to the agent
	top     string // top-level YAML sections after agents
	mcp     bool   // the binary has the mcp plugin
	// accepts is what the session's provider takes (Options.Accepts)
	accepts parts.Capabilities
	// closeTimeout bounds a session/close (Options.CloseTimeout)
	closeTimeout time.Duration
	// user is the person the editor acts for (Options.User)
	user sessions.Principal
	// listPageSize is a session/list's page (Options.ListPageSize)
	listPageSize int
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	resetGate()
	store := o.store
	if store == "" {
		store = t.TempDir()
	}
	replies, _ := json.Marshal(o.replies)
	yaml := "plugins:\n  - use: llm.scripted\n    config: {replies: " + string(replies) + "}\n" +
		"  - use: session.jsonl\n    config: {dir: " + store + "}\n  - use: test.gate\n" + o.extra +
		"agents:\n  - id: main\n    provider: scripted\n" + o.agent + o.top
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, h: h, c: newClient(), served: make(chan error, 1), dir: t.TempDir(), store: store}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	e.stdin = inW
	go func() {
		err := dshacp.Serve(stdctx.Background(), inR, outW, dshacp.Options{Sessions: h.Sessions(), Agent: "main", Presets: o.presets, Mode: o.mode, Version: "test", MCP: o.mcp, CloseTimeout: o.closeTimeout, Accepts: o.accepts, User: o.user, ListPageSize: o.listPageSize})
		outW.Close()
		e.served <- err
	}()
	e.conn = acp.NewClientSideConnection(e.c, inW, outR)
	t.Cleanup(func() { e.stop() })
	return e
}

// stop closes the client's side and waits for the server to finish.
func (e *env) stop() error {
	e.stdin.Close()
	var err error
	select {
	case err = <-e.served:
		e.served <- err
	case <-time.After(wait):
		e.t.Fatal("Serve did not return after stdin closed")
	}
	<-e.conn.Done()
	e.h.Close(stdctx.Background())
	return err
}

func (e *env) ctx() stdctx.Context {
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), wait)
	e.t.Cleanup(cancel)
	return ctx
}

func (e *env) newSession() acp.SessionId {
	e.t.Helper()
	if _, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		e.t.Fatal(err)
	}
	r, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: e.dir, McpServers: []acp.McpServer{}})
	if err != nil {
		e.t.Fatal(err)
	}
	return r.SessionId
}

func (e *env) prompt(id acp.SessionId, text string) (acp.PromptResponse, error) {
	return e.conn.Prompt(e.ctx(), acp.PromptRequest{SessionId: id, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
}

func rpcCode(err error) int {
	var re *acp.RequestError
	if errors.As(err, &re) {
		return re.Code
	}
	return 0
}

func newSessionReq(dir string) acp.NewSessionRequest {
	return acp.NewSessionRequest{Cwd: dir, McpServers: []acp.McpServer{}}
}

// history is the log of session id, read through the session service.
func history(tb testing.TB, svc sessions.Service, id string) []session.Event {
	tb.Helper()
	evs, err := svc.History(stdctx.Background(), id, 0)
	if err != nil {
		tb.Fatal(err)
	}
	return evs
}

// pending is how many prompts session id has queued.
func pending(tb testing.TB, svc sessions.Service, id string) int {
	tb.Helper()
	in, err := svc.Info(stdctx.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	return in.Pending
}

// startHost starts a host from yaml, starting no agent of the config.
func startHost(tb testing.TB, yaml string) (*host.Host, func()) {
	tb.Helper()
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		tb.Fatal(err)
	}
	return h, func() { h.Close(stdctx.Background()) }
}

// serveOn serves h's sessions to c over pipes; done closes the client's
// side and waits for Serve.
func serveOn(tb testing.TB, h *host.Host, c acp.Client) (*acp.ClientSideConnection, func()) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	served := make(chan error, 1)
	go func() {
		err := dshacp.Serve(stdctx.Background(), inR, outW, dshacp.Options{Sessions: h.Sessions(), Agent: "main", Version: "test"})
		outW.Close()
		served <- err
	}()
	conn := acp.NewClientSideConnection(c, inW, outR)
	return conn, func() {
		inW.Close()
		if err := <-served; err != nil {
			tb.Error(err)
		}
		<-conn.Done()
	}
}
