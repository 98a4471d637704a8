package serve_test

import (
	"bufio"
	"bytes"
	stdctx "context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/syncbuf"
	"github.com/dsh-go/dsh/plugin"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/jobs"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// patience bounds every wait of the tests.
const patience = 15 * time.Second

// gate is the tool "gate": it returns "opened" once the test opens it, or
// "cancelled" when its call is cancelled.
var gate = struct {
	mu      sync.Mutex
	open    chan struct{}
	started chan string
}{open: make(chan struct{}), started: make(chan string, 16)}

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

func init() {
	plugin.Register("servetest.gate", "a tool that waits for the test (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
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
	// servetest.ask registers "ask", a tool whose every call asks for
	// approval.
	plugin.Register("servetest.ask", "a tool that asks for approval (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		return svc.Register(ctx, tools.Tool{
			Name: "ask", Description: "asks first", Parameters: json.RawMessage(`{"type":"object"}`), Approval: tools.Ask,
			Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
				return tools.Result{Content: "the asked tool ran"}, nil
			},
		})
	}, tools.Key)
}

// env is a host with the scripted model and a session store, the server
// on a real listener (httptest), and a client that checks every JSON
// response against the OpenAPI document.
type env struct {
	t      testing.TB
	h      *host.Host
	srv    *serve.Server
	ts     *httptest.Server
	token  string
	store  string
	log    *syncbuf.Buffer
	doc    *apiDoc
	client *http.Client
	served chan error
	// seen collects every response body, for the test that no token
	// leaks.
	mu   sync.Mutex
	seen []string
	shut bool
}

type envOpts struct {
	replies []scripted.Reply
	delay   time.Duration
	extra   string // YAML plugin entries
	serve   string // YAML keys under serve:
	top     string // YAML top-level keys (attachments:, limits:)
	store   string // a session directory shared between envs
	noAuth  bool
	// tokens are named tokens beside the env's own (which is named
	// "default").
	tokens  []serve.Token
	hooks   http.Handler
	noStore bool // no persistence plugin
	// persist is the persistence plugin's YAML entry, instead of
	// session.jsonl's.
	persist string
	// service wraps the host's controller in the session service the
	// server is given; nil gives it the controller.
	service func(*sessions.Controller) sessions.Service
	// approverGrace is the host's ApproverGrace (dsh serve's
	// serve.approver_grace); 0 refuses a question nobody answers at once.
	approverGrace time.Duration
	// streamBuffer is the server's Options.StreamBuffer.
	streamBuffer int
	// metrics is served at /metrics (Options.Metrics).
	metrics http.Handler
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	resetGate()
	if o.store == "" {
		o.store = t.TempDir()
	}
	sc := scripted.Config{Replies: o.replies, Delay: o.delay}
	replies, _ := json.Marshal(sc)
	yaml := "plugins:\n  - use: llm.scripted\n    config: " + string(replies) + "\n" +
		persistence(o) + "  - use: servetest.gate\n  - use: servetest.ask\n" + o.extra +
		"agents:\n  - id: main\n    provider: scripted\n  - id: second\n    provider: scripted\n    model: m2\n"
	if !strings.Contains(o.serve, "state_dir:") {
		// Else the server's state (titles.json) lands in the source tree,
		// shared by every test and run.
		o.serve = "  state_dir: " + t.TempDir() + "\n" + o.serve
	}
	yaml += "serve:\n" + o.serve + o.top
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger(), ApproverGrace: o.approverGrace})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, h: h, store: o.store, log: &syncbuf.Buffer{}, doc: loadDoc(t)}
	if !o.noAuth {
		b := make([]byte, 16)
		rand.Read(b)
		e.token = "tok" + hex.EncodeToString(b)
	}
	att, _ := attachments.Key.Get(h.Root())
	var svc sessions.Service = h.Sessions()
	if o.service != nil {
		svc = o.service(h.Sessions())
	}
	e.srv, err = serve.New(serve.Options{
		Sessions: svc, Config: cfg, Token: e.token, Tokens: o.tokens, NoAuth: o.noAuth, Hooks: o.hooks, Version: "test",
		Log: slog.New(slog.NewTextHandler(e.log, &slog.HandlerOptions{Level: slog.LevelDebug})), Attachments: att, Jobs: jobs.Of(h.Root()),
		StreamBuffer: o.streamBuffer, Metrics: o.metrics,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.ts = httptest.NewUnstartedServer(nil)
	e.ts.Config = &http.Server{Handler: e.srv.Handler()}
	e.served = make(chan error, 1)
	go func() { e.served <- e.srv.Serve(e.ts.Listener) }()
	e.ts.URL = "http://" + e.ts.Listener.Addr().String()
	e.client = &http.Client{Timeout: patience}
	t.Cleanup(e.close)
	return e
}

func persistence(o envOpts) string {
	if o.noStore {
		return ""
	}
	if o.persist != "" {
		return o.persist
	}
	return "  - use: session.jsonl\n    config: {dir: " + o.store + "}\n"
}

// close shuts the server down (once), then the host.
func (e *env) close() {
	e.mu.Lock()
	shut := e.shut
	e.shut = true
	e.mu.Unlock()
	if !shut {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
		defer cancel()
		if err := e.srv.Shutdown(ctx); err != nil {
			e.t.Errorf("shutdown: %v", err)
		}
	}
	e.client.CloseIdleConnections()
	e.h.Close(stdctx.Background())
}

// shutdown runs the server's Shutdown as the test's close would.
func (e *env) shutdown(ctx stdctx.Context) error {
	e.mu.Lock()
	e.shut = true
	e.mu.Unlock()
	return e.srv.Shutdown(ctx)
}

// response is what the client got.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
}

// apiErr is the error body.
type apiErr struct {
	Code      string `json:"code"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	Presented bool   `json:"presented"`
	RequestID string `json:"request_id"`
}

func (r response) err(t testing.TB) apiErr {
	t.Helper()
	var a apiErr
	r.json(t, &a)
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("error with content type %q", ct)
	}
	return a
}

// call sends a request with the token and checks the response against the
// OpenAPI document; body is JSON-encoded unless it is a string.
func (e *env) call(method, path string, body any, header ...string) response {
	e.t.Helper()
	hdr := http.Header{}
	if e.token != "" {
		hdr.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		hdr.Set(header[i], header[i+1])
	}
	return e.raw(method, path, body, hdr)
}

// raw sends a request with exactly the given headers.
func (e *env) raw(method, path string, body any, hdr http.Header) response {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, e.ts.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header = hdr
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := response{status: resp.StatusCode, header: resp.Header, body: b}
	e.mu.Lock()
	e.seen = append(e.seen, string(b)+fmtHeader(resp.Header))
	e.mu.Unlock()
	e.doc.check(e.t, method, req.URL.Path, r)
	return r
}

func fmtHeader(h http.Header) string {
	var b strings.Builder
	h.Write(&b)
	return b.String()
}

type sessionOut struct {
	ID        string `json:"id"`
	Agent     string `json:"agent"`
	Title     string `json:"title"`
	Turns     int    `json:"turns"`
	State     string `json:"state"`
	Open      bool   `json:"open"`
	Running   bool   `json:"running"`
	LastSeq   int64  `json:"last_seq"`
	Approvals []struct {
		ID      int64 `json:"id"`
		Request struct {
			Tool string `json:"tool"`
		} `json:"request"`
	} `json:"approvals"`
	Outcomes []struct {
		Type      string `json:"type"`
		RequestID string `json:"request_id"`
		Code      string `json:"code"`
		Reason    string `json:"reason"`
	} `json:"outcomes"`
}

// open opens a session and returns its id.
func (e *env) open(body any) string {
	e.t.Helper()
	r := e.call("POST", "/v1/sessions", body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("open: %d %s", r.status, r.body)
	}
	var s sessionOut
	r.json(e.t, &s)
	return s.ID
}

// send posts a message and returns its message id.
func (e *env) send(id, requestID, content string) string {
	e.t.Helper()
	r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": requestID, "content": content})
	if r.status != http.StatusAccepted {
		e.t.Fatalf("message: %d %s", r.status, r.body)
	}
	var out struct {
		MessageID string `json:"message_id"`
		RequestID string `json:"request_id"`
	}
	r.json(e.t, &out)
	if out.MessageID == "" || out.RequestID != requestID {
		e.t.Fatalf("accepted %s", r.body)
	}
	return out.MessageID
}

type eventOut struct {
	Seq       int64  `json:"seq"`
	Type      string `json:"type"`
	Turn      int    `json:"turn"`
	Reason    string `json:"reason"`
	RequestID string `json:"request_id"`
	Message   *struct {
		Content string `json:"content"`
	} `json:"message"`
}

// events returns the session's whole history through GET .../events.
func (e *env) events(id string) []eventOut {
	e.t.Helper()
	var all []eventOut
	for {
		r := e.call("GET", "/v1/sessions/"+id+"/events?after="+itoa(int64(len(all))), nil)
		if r.status != http.StatusOK {
			e.t.Fatalf("events: %d %s", r.status, r.body)
		}
		var page struct {
			Events  []eventOut `json:"events"`
			LastSeq int64      `json:"last_seq"`
		}
		r.json(e.t, &page)
		all = append(all, page.Events...)
		if int64(len(all)) >= page.LastSeq || len(page.Events) == 0 {
			return all
		}
	}
}

// waitEvents polls the history until ok holds.
func (e *env) waitEvents(id, what string, ok func([]eventOut) bool) []eventOut {
	e.t.Helper()
	deadline := time.Now().Add(patience)
	for {
		evs := e.events(id)
		if ok(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("no %s in %+v", what, evs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// turnsEnded counts the turn/end events.
func turnsEnded(n int) func([]eventOut) bool {
	return func(evs []eventOut) bool {
		c := 0
		for _, ev := range evs {
			if ev.Type == "turn/end" {
				c++
			}
		}
		return c >= n
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// streamMsg is one Server-Sent Events message.
type streamMsg struct {
	event, id string
	data      []byte
}

// eventStream is the test's SSE client.
type eventStream struct {
	pings atomic.Int64
	resp  *http.Response
	msgs  chan streamMsg
	done  chan struct{}
	// stop ends a reader waiting to hand over a message nobody takes (a
	// test that failed before reading the stream to its end).
	stop     chan struct{}
	stopOnce sync.Once
}

// stream connects to the session's stream with the given headers.
func (e *env) stream(ctx stdctx.Context, id string, client *http.Client, header ...string) *eventStream {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/v1/sessions/"+id+"/stream", nil)
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	if client == nil {
		client = &http.Client{}
	}
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e.t.Fatalf("stream: %d %s", resp.StatusCode, b)
	}
	s := &eventStream{resp: resp, msgs: make(chan streamMsg, 1<<16), done: make(chan struct{}), stop: make(chan struct{})}
	go s.read()
	return s
}

// streamPaused connects like stream but reads nothing until start: the
// connection's buffers fill and the server's writes block.
func (e *env) streamPaused(ctx stdctx.Context, id string, client *http.Client) *eventStream {
	e.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/v1/sessions/"+id+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+e.token)
	resp, err := client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("stream: %d", resp.StatusCode)
	}
	return &eventStream{resp: resp, msgs: make(chan streamMsg, 16), done: make(chan struct{}), stop: make(chan struct{})}
}

// start begins reading a paused stream.
func (s *eventStream) start() { go s.read() }

func (s *eventStream) read() {
	defer close(s.done)
	defer close(s.msgs)
	sc := bufio.NewScanner(s.resp.Body)
	sc.Buffer(nil, 16<<20)
	var m streamMsg
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == ": ping":
			s.pings.Add(1)
		case line == "":
			if m.event != "" {
				select {
				case s.msgs <- m:
				case <-s.stop:
					return
				}
			}
			m = streamMsg{}
		case strings.HasPrefix(line, "event: "):
			m.event = line[len("event: "):]
		case strings.HasPrefix(line, "id: "):
			m.id = line[len("id: "):]
		case strings.HasPrefix(line, "data: "):
			m.data = []byte(line[len("data: "):])
		}
	}
}

// close disconnects and waits for the reader.
func (s *eventStream) close() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.resp.Body.Close()
	<-s.done
}

// next returns the next message; ok is false when the stream ended.
func (s *eventStream) next(t *testing.T) (streamMsg, bool) {
	t.Helper()
	select {
	case m, ok := <-s.msgs:
		return m, ok
	case <-time.After(patience):
		t.Fatal("no stream message in time")
	}
	return streamMsg{}, false
}

// update is a stream message's data.
type update struct {
	Kind  string    `json:"kind"`
	Seq   int64     `json:"seq"`
	Event *eventOut `json:"event"`
	Chunk struct {
		MessageID string `json:"message_id"`
		Index     int    `json:"index"`
	} `json:"chunk"`
	Question *struct {
		ID int64 `json:"id"`
	} `json:"question"`
	Settled *struct {
		QuestionID int64  `json:"question_id"`
		AnsweredBy string `json:"answered_by"`
	} `json:"settled"`
	Notice *struct {
		ID        int64  `json:"id"`
		RequestID string `json:"request_id"`
		Code      string `json:"code"`
	} `json:"notice"`
}
