package webhook_test

import (
	"bytes"
	stdctx "context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/testtools"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/serve/webhook"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// wait bounds every wait of the tests.
const wait = 10 * time.Second

const secret = "s3cret-for-tests"

// env is a host, the webhooks handler and an HTTP server in front of it.
type env struct {
	t   *testing.T
	h   *host.Host
	cfg *config.Config
	hk  *webhook.Handler
	srv *httptest.Server
}

// base starts the scripted model (echo unless replies are given), a
// session store and the test tools; extra adds YAML plugin entries.
func base(t *testing.T, replies, extra string) string {
	return baseIn(t.TempDir(), replies, extra)
}

// baseIn is base with the session store in dir, to restart on it.
func baseIn(dir, replies, extra string) string {
	if replies == "" {
		replies = "[]"
	}
	return "plugins:\n  - use: llm.scripted\n    config: {replies: " + replies + "}\n" +
		"  - use: session.jsonl\n    config: {dir: " + dir + "}\n  - use: test.risky\n  - use: test.block\n" + extra +
		"agents:\n  - id: main\n    provider: scripted\n"
}

func newEnv(t *testing.T, yaml string) *env {
	t.Helper()
	testtools.ResetBlock()
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	hk, err := webhook.New(webhook.Options{Sessions: h.Sessions(), Config: cfg, Getenv: func(string) string { return secret }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), wait)
		defer cancel()
		if err := hk.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	mux := http.NewServeMux()
	mux.Handle("/hooks/", hk)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &env{t: t, h: h, cfg: cfg, hk: hk, srv: srv}
}

func sign(key string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// response is an answer: its status and its JSON body.
type response struct {
	status int
	header http.Header
	body   map[string]any
}

func (r response) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

// post sends body to /hooks/name with the headers (a "" value drops it).
func (e *env) post(name string, body []byte, header map[string]string) response {
	e.t.Helper()
	return e.do(http.MethodPost, name, bytes.NewReader(body), header)
}

// signed posts body signed with the test secret.
func (e *env) signed(name string, body []byte, header map[string]string) response {
	e.t.Helper()
	h := map[string]string{"X-Hub-Signature-256": sign(secret, body)}
	for k, v := range header {
		h[k] = v
	}
	return e.post(name, body, h)
}

func (e *env) do(method, name string, body io.Reader, header map[string]string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+"/hooks/"+name, body)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	out := response{status: res.StatusCode, header: res.Header}
	raw, _ := io.ReadAll(res.Body)
	if res.Header.Get("Content-Type") != "application/json" {
		e.t.Fatalf("%s /hooks/%s answered %d with Content-Type %q: %s", method, name, res.StatusCode, res.Header.Get("Content-Type"), raw)
	}
	if err := json.Unmarshal(raw, &out.body); err != nil {
		e.t.Fatalf("%s /hooks/%s answered %d with a body that is not JSON: %s", method, name, res.StatusCode, raw)
	}
	return out
}

// expect fails unless r has the status and, when code is set, the code.
func expect(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.str("code") != code) {
		t.Fatalf("answered %d %v; want %d %s", r.status, r.body, status, code)
	}
}

// events returns the log of the open session id.
func (e *env) events(id string) []session.Event {
	e.t.Helper()
	if _, ok := e.h.Sessions().Get(id); !ok {
		e.t.Fatalf("session %q is not open", id)
	}
	evs, err := e.h.Sessions().History(stdctx.Background(), id, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

// of returns the events of type typ.
func of(events []session.Event, typ session.Type) []session.Event {
	var out []session.Event
	for _, ev := range events {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// waitUntil polls cond until it holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// turnsEnded waits until the open session id has taken n prompts and ended
// every turn it started.
func (e *env) turnsEnded(id string, n int) []session.Event {
	e.t.Helper()
	var events []session.Event
	// n prompts, not n turns: prompts that reach the inbox before the
	// agent starts its next turn are answered in one turn together.
	waitUntil(e.t, "the session took its prompts and ended its turns", func() bool {
		events = e.events(id)
		started, ended := len(of(events, session.TurnStart)), len(of(events, session.TurnEnd))
		return len(of(events, session.UserMessage)) >= n && ended > 0 && ended == started
	})
	return events
}

// persisted returns the sessions of the store.
func (e *env) persisted() []session.Summary {
	e.t.Helper()
	list, err := e.h.Sessions().List(stdctx.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return list
}
