package web_test

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/serve/web"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/jobs"
	"github.com/hashicorp/go-hclog"
)

// step bounds one browser step; browserLife bounds a whole browser, so a
// hang fails the test instead of blocking CI.
const (
	step        = 20 * time.Second
	browserLife = 2 * time.Minute
	token       = "page-test-token"
)

// chromium is Debian's browser, which .ci/run installs.
const chromium = "/usr/bin/chromium"

// script is the model's part in the tests: an answer that streams its
// reasoning and text and asks for the approval-gated tool, then a final
// answer after the tool's result.
var script = []scripted.Reply{
	{Reasoning: "the user wants it louder", Text: "Let me shout that for you.",
		ToolCalls: []scripted.Call{{Name: "shout", Arguments: `{"text":"hello web"}`}}},
	{Text: "All done: the tool shouted it."},
}

// env is a host and a serve.Server on httptest, with the page mounted the
// way dsh serve mounts it.
type env struct {
	url string
	// sessionDir holds the session logs (session.jsonl).
	sessionDir string
	h          *host.Host
	srv        *serve.Server
	// streams counts the SSE connections and remembers their
	// Last-Event-ID headers.
	mu          sync.Mutex
	lastEventID []string
	// opened are the bodies of POST /v1/sessions.
	opened []string
	// cuts end the streams so far; down makes every request fail and
	// streamDown every stream request.
	cuts             []stdctx.CancelFunc
	down, streamDown atomic.Bool
	// drop, when set, ends the first stream right after it wrote a
	// message of this kind.
	drop string
}

type envOpts struct {
	drop string
	// extraYAML is appended to the config; serveYAML to its serve: key
	// (indented by two spaces).
	extraYAML string
	serveYAML string
	// replies replace the script; agentYAML is added to the agent main's
	// entry (indented by four spaces).
	replies   []scripted.Reply
	agentYAML string
	// pluginYAML adds entries to the root's plugins.
	pluginYAML string
	// delay is the scripted model's pause before each chunk (15ms).
	delay string
}

func newEnv(t testing.TB, o envOpts) *env {
	t.Helper()
	sc := script
	if o.replies != nil {
		sc = o.replies
	}
	replies, _ := json.Marshal(sc)
	sessionDir := t.TempDir()
	delay := "15ms"
	if o.delay != "" {
		delay = o.delay
	}
	yaml := "plugins:\n  - use: llm.scripted\n    config: {delay: " + delay + ", simulate_usage: true, replies: " + string(replies) + "}\n" +
		"  - use: session.jsonl\n    config: {dir: " + sessionDir + "}\n" +
		"  - use: test.shout\n  - use: test.refuse\n" + o.pluginYAML +
		"agents:\n  - id: main\n    provider: scripted\n    model: scripted-1\n" + o.agentYAML +
		"serve:\n  state_dir: " + t.TempDir() + "\n" + o.serveYAML +
		"pricing: {currency: EUR, models: {scripted-1: {input: 2, output: 8}}}\n" + o.extraYAML
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	att, _ := attachments.Key.Get(h.Root())
	srv, err := serve.New(serve.Options{Sessions: h.Sessions(), Config: cfg, Token: token, Version: "test", Attachments: att, Jobs: jobs.Of(h.Root())})
	if err != nil {
		h.Close(stdctx.Background())
		t.Fatal(err)
	}
	e := &env{h: h, srv: srv, drop: o.drop, sessionDir: sessionDir}
	ts := httptest.NewServer(e.mux())
	e.url = ts.URL
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		ts.Close()
		h.Close(stdctx.Background())
	})
	return e
}

// mux serves the server's handler, counting streams and dropping one when
// asked. While serve's page route still serves its placeholder, the mux
// mounts the page at "/" and "/assets/" itself, as that route will.
func (e *env) mux() http.Handler {
	mux := http.NewServeMux()
	api := e.srv.Handler()
	probe := httptest.NewRecorder()
	api.ServeHTTP(probe, httptest.NewRequest("GET", "/assets/app.js", nil))
	if probe.Code != http.StatusOK {
		mux.Handle("GET /{$}", web.Handler())
		mux.Handle("GET /assets/", web.Handler())
	}
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/v1/sessions" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			e.mu.Lock()
			e.opened = append(e.opened, string(body))
			e.mu.Unlock()
		}
		if e.down.Load() || (e.streamDown.Load() && strings.HasSuffix(r.URL.Path, "/stream")) {
			// A server that is gone, or a proxy that drops the stream:
			// the connection closes without an answer.
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		if strings.HasSuffix(r.URL.Path, "/stream") {
			ctx, cancel := stdctx.WithCancel(r.Context())
			defer cancel()
			r = r.WithContext(ctx)
			e.mu.Lock()
			e.cuts = append(e.cuts, cancel)
			e.lastEventID = append(e.lastEventID, r.Header.Get("Last-Event-ID"))
			first := len(e.lastEventID) == 1
			e.mu.Unlock()
			if first && e.drop != "" {
				ctx, cancel := stdctx.WithCancel(r.Context())
				defer cancel()
				w = &dropWriter{ResponseWriter: w, after: "event: " + e.drop, drop: cancel}
				r = r.WithContext(ctx)
			}
		}
		api.ServeHTTP(w, r)
	}))
	return mux
}

// streams returns the Last-Event-ID of each stream request so far.
func (e *env) streams() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.lastEventID...)
}

// dropWriter ends a stream from the server's side, as a proxy or a network
// would, once a message of one kind went out.
type dropWriter struct {
	http.ResponseWriter
	after string
	drop  stdctx.CancelFunc
	seen  string
}

func (w *dropWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	// A message may come in several writes: look at what was written
	// lately, not at one write.
	w.seen = lastBytes(w.seen+string(b), 4096)
	if strings.Contains(w.seen, w.after+"\n") {
		w.drop()
	}
	return n, err
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (w *dropWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// poll waits until ok holds, for at most one step.
func poll(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(step)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, step)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// browser is a headless Chromium with one tab.
type browser struct {
	t   testing.TB
	ctx stdctx.Context
	// errors are the page's uncaught exceptions and console errors.
	mu     sync.Mutex
	errors []string
}

func newBrowser(t testing.TB) *browser {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		t.Fatalf("the page tests need Debian's chromium at %s (apt-get install chromium): %v", chromium, err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(420, 900), // a phone's width: the narrow layout
	)
	if os.Geteuid() == 0 {
		// Chromium's sandbox refuses to run as root (CI runs as root).
		opts = append(opts, chromedp.NoSandbox)
	}
	life, stopLife := stdctx.WithTimeout(stdctx.Background(), browserLife)
	actx, stopAlloc := chromedp.NewExecAllocator(life, opts...)
	ctx, stopTab := chromedp.NewContext(actx)
	b := &browser{t: t, ctx: ctx}
	t.Cleanup(func() {
		// Close the browser and wait for its process and goroutines.
		done, cancel := stdctx.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Cancel(done); err != nil && !errors.Is(err, stdctx.Canceled) {
			t.Logf("closing the browser: %v", err)
		}
		stopTab()
		stopAlloc()
		stopLife()
	})
	// The first Run starts the browser; it must not carry a step's timeout.
	if err := chromedp.Listen(ctx, b.listen); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}
	return b
}

func (b *browser) listen(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		d := ev.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		b.errors = append(b.errors, fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber+1, text))
	case *runtime.EventConsoleAPICalled:
		if ev.Type == runtime.ConsoleAPICalledTypeError {
			var parts []string
			for _, a := range ev.Args {
				parts = append(parts, string(a.Value)+a.Description)
			}
			b.errors = append(b.errors, "console.error: "+strings.Join(parts, " "))
		}
	}
}

// pageErrors returns the exceptions and console errors so far.
func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// do runs the actions of one step; on failure it fails the test with what
// the page shows.
func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := stdctx.WithTimeout(b.ctx, step)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\n%s", what, err, b.dump())
	}
}

// wait polls a JavaScript condition until it is truthy.
func (b *browser) wait(what, cond string) {
	b.t.Helper()
	b.do("waiting for "+what, chromedp.Action[chromedp.Void](func(ctx stdctx.Context, t *chromedp.Target) (chromedp.Void, error) {
		_, err := chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingInterval(20*time.Millisecond), chromedp.WithPollingTimeout(step))(ctx, t)
		return chromedp.Void{}, err
	}))
}

// eval returns the value of a JavaScript expression.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := stdctx.WithTimeout(b.ctx, step)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v\n%s", expr, err, b.dump())
	}
	return v
}

// dump is what the page shows, for a failure's message.
func (b *browser) dump() string {
	ctx, cancel := stdctx.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		text = fmt.Sprintf("(the page could not be read: %v)", err)
	}
	return "--- page ---\n" + text + "\n--- page errors ---\n" + strings.Join(b.pageErrors(), "\n")
}

// evalAwait returns the strings a JavaScript promise resolves to.
func (b *browser) evalAwait(expr string) []string {
	b.t.Helper()
	ctx, cancel := stdctx.WithTimeout(b.ctx, step)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v\n%s", expr, err, b.dump())
	}
	return v
}

// cutStreams ends every stream from the server's side.
func (e *env) cutStreams() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.cuts {
		c()
	}
}
