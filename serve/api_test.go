package serve_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// A session's whole life over the API: opened, prompted, listed, read,
// closed (flushed), resumed from the store, prompted again, deleted.
func TestSessionLifecycle(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{Text: "first answer"}, {Text: "second answer"}}})

	if r := e.raw("GET", "/v1/health", nil, http.Header{}); r.status != 200 || !strings.Contains(string(r.body), `"version":"test"`) {
		t.Fatalf("health: %d %s", r.status, r.body)
	}
	var agents struct {
		Agents  []struct{ ID, Provider, Model string }
		Presets []string
		Default string
	}
	e.call("GET", "/v1/agents", nil).json(t, &agents)
	if len(agents.Agents) != 2 || agents.Agents[1].Model != "m2" || agents.Default != "main" || !contains(agents.Presets, "workspace-write") {
		t.Fatalf("agents %+v", agents)
	}

	r := e.call("POST", "/v1/sessions", map[string]any{"agent": "second", "session_id": "s-1"})
	if r.status != http.StatusCreated || r.header.Get("Location") != "/v1/sessions/s-1" {
		t.Fatalf("open: %d %s", r.status, r.body)
	}
	var s sessionOut
	r.json(t, &s)
	if s.ID != "s-1" || s.Agent != "second" || !s.Open || s.State != "open" {
		t.Fatalf("opened %+v", s)
	}
	e.send("s-1", "r1", "hello there")
	evs := e.waitEvents("s-1", "turn end", turnsEnded(1))
	if got := answer(evs); got != "first answer" {
		t.Fatalf("answer %q in %+v", got, evs)
	}

	var list struct{ Sessions []sessionOut }
	e.call("GET", "/v1/sessions", nil).json(t, &list)
	if len(list.Sessions) != 1 || !list.Sessions[0].Open || list.Sessions[0].Title != "hello there" || list.Sessions[0].LastSeq != int64(len(evs)) {
		t.Fatalf("list %+v (%d events)", list, len(evs))
	}
	var page struct {
		Sessions []sessionOut
		Next     string
	}
	e.call("GET", "/v1/sessions?agent=second&limit=1", nil).json(t, &page)
	if len(page.Sessions) != 1 || !page.Sessions[0].Open || page.Next != "" {
		t.Fatalf("the page of agent second: %+v", page)
	}
	page.Sessions = nil
	e.call("GET", "/v1/sessions?agent=main", nil).json(t, &page)
	if len(page.Sessions) != 0 {
		t.Fatalf("the page of agent main: %+v", page)
	}
	if r := e.call("GET", "/v1/sessions?limit=many", nil); r.status != http.StatusBadRequest {
		t.Fatalf("a bad limit: %d %s", r.status, r.body)
	}

	if r := e.call("DELETE", "/v1/sessions/s-1", nil); r.status != http.StatusConflict || r.err(t).Code != "SESSION_LOCKED" {
		t.Fatalf("delete while open: %d %s", r.status, r.body)
	}

	r = e.call("POST", "/v1/sessions/s-1/close", nil)
	r.json(t, &s)
	if r.status != 200 || s.Open || s.State == "open" || s.Turns != 1 || s.LastSeq != int64(len(evs)) {
		t.Fatalf("closed: %d %s", r.status, r.body)
	}
	// A closed session takes nothing, and says how to open it.
	if r := e.call("POST", "/v1/sessions/s-1/messages", map[string]string{"content": "x"}); r.status != http.StatusConflict ||
		r.err(t).Code != "SESSION_CLOSED" || !strings.Contains(r.err(t).Message, "/resume") {
		t.Fatalf("message to closed: %d %s", r.status, r.body)
	}
	// Its history comes from the store.
	closedEvs := e.events("s-1")
	if len(closedEvs) != len(evs) || closedEvs[len(closedEvs)-1].Type != "turn/end" {
		t.Fatalf("stored events %+v", closedEvs)
	}

	r = e.call("POST", "/v1/sessions/s-1/resume", nil)
	r.json(t, &s)
	if r.status != 200 || !s.Open || s.Agent != "second" {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	// Resuming what is open answers it as is.
	if r := e.call("POST", "/v1/sessions/s-1/resume", nil); r.status != 200 {
		t.Fatalf("resume again: %d %s", r.status, r.body)
	}
	e.send("s-1", "r2", "and again")
	evs = e.waitEvents("s-1", "second turn end", turnsEnded(2))
	if got := answer(evs); got != "second answer" {
		t.Fatalf("after resume: %q", got)
	}
	var detail sessionOut
	e.call("GET", "/v1/sessions/s-1", nil).json(t, &detail)
	if !detail.Open || detail.Turns != 2 || detail.Approvals == nil {
		t.Fatalf("detail %+v", detail)
	}

	e.call("POST", "/v1/sessions/s-1/close", nil)
	if r := e.call("DELETE", "/v1/sessions/s-1", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/v1/sessions/s-1", "/v1/sessions/s-1/events"} {
		if r := e.call("GET", path, nil); r.status != http.StatusNotFound || r.err(t).Code != "SESSION_NOT_FOUND" {
			t.Fatalf("%s after delete: %d %s", path, r.status, r.body)
		}
	}
	if r := e.call("DELETE", "/v1/sessions/s-1", nil); r.status != http.StatusNotFound {
		t.Fatalf("delete twice: %d %s", r.status, r.body)
	}
}

// The text of the last assistant message.
func answer(evs []eventOut) string {
	for i := len(evs) - 1; i >= 0; i-- {
		if evs[i].Type == "assistant/message" && evs[i].Message != nil {
			return evs[i].Message.Content
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// A retried POST — sequential or racing — gets the original message id,
// and the message is in the log once.
func TestRetryIsDeliveredOnce(t *testing.T) {
	e := newEnv(t, envOpts{})
	id := e.open(nil)
	first := e.send(id, "same-request", "echo me")
	var wg sync.WaitGroup
	ids := make([]string, 4)
	for i := range ids {
		wg.Go(func() { ids[i] = e.send(id, "same-request", "echo me") })
	}
	wg.Wait()
	for _, got := range ids {
		if got != first {
			t.Fatalf("retry answered %q, the original is %q", got, first)
		}
	}
	evs := e.waitEvents(id, "turn end", turnsEnded(1))
	// Once more after the log holds it.
	if got := e.send(id, "same-request", "echo me"); got != first {
		t.Fatalf("late retry answered %q, want %q", got, first)
	}
	n := 0
	for _, ev := range e.events(id) {
		if ev.Type == "user/message" {
			n++
			if ev.RequestID != "same-request" {
				t.Fatalf("request id %q", ev.RequestID)
			}
		}
	}
	if n != 1 || answer(evs) != "You said: echo me" {
		t.Fatalf("%d user messages, answer %q", n, answer(evs))
	}
	// Without a request id the server makes one and says which.
	r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"content": "no id"})
	var acc struct {
		RequestID string `json:"request_id"`
	}
	r.json(t, &acc)
	if r.status != http.StatusAccepted || !strings.HasPrefix(acc.RequestID, "http-") {
		t.Fatalf("no id: %d %s", r.status, r.body)
	}
}

// Admission's refusal is a 422 with the plugin's reason, kept as an
// outcome of the session.
func TestRefusalIs422(t *testing.T) {
	e := newEnv(t, envOpts{extra: "  - use: admission.ready-gate\n    config: {timeout: 10ms}\n"})
	id := e.open(nil)
	r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "refused-1", "content": "hello"})
	if r.status != http.StatusUnprocessableEntity {
		t.Fatalf("refusal: %d %s", r.status, r.body)
	}
	a := r.err(t)
	if a.Code != "SESSION_PROMPT_REJECTED" || a.Reason != "admission/not-ready" || a.RequestID != "refused-1" || a.Presented || !strings.Contains(a.Message, "not ready") {
		t.Fatalf("refusal body %s", r.body)
	}
	if !strings.Contains(string(r.body), `"presented":false`) {
		// presented is part of a refusal's body even when false.
		t.Fatalf("refusal body without presented: %s", r.body)
	}
	var s sessionOut
	e.call("GET", "/v1/sessions/"+id, nil).json(t, &s)
	if len(s.Outcomes) != 1 || s.Outcomes[0].RequestID != "refused-1" || s.Outcomes[0].Reason != "admission/not-ready" {
		t.Fatalf("outcomes %+v", s.Outcomes)
	}
	for _, ev := range e.events(id) {
		if ev.Type == "user/message" {
			t.Fatalf("a refused message was logged: %+v", ev)
		}
	}
}

// Malformed requests are refused with a code and a message that says what
// is wrong and how to fix it.
func TestBadRequests(t *testing.T) {
	e := newEnv(t, envOpts{serve: "  max_body_bytes: 200\n"})
	id := e.open(nil)
	msgs := "/v1/sessions/" + id + "/messages"
	cases := []struct {
		name, method, path string
		body               any
		status             int
		code, says         string
	}{
		{"not JSON", "POST", msgs, `{"content": "x"`, 400, "SERVE_BAD_REQUEST", "not valid JSON"},
		{"unknown field", "POST", msgs, `{"content":"x","text":"y"}`, 400, "SERVE_BAD_REQUEST", `takes no field "text"; its fields are "request_id", "content", "mode"`},
		{"wrong type", "POST", msgs, `{"content":5}`, 400, "SERVE_BAD_REQUEST", `field "content"`},
		{"not an object", "POST", msgs, `[1]`, 400, "SERVE_BAD_REQUEST", "send a JSON object"},
		{"two values", "POST", msgs, `{"content":"x"} {}`, 400, "SERVE_BAD_REQUEST", "more than one JSON value"},
		{"empty body", "POST", msgs, nil, 400, "SERVE_BAD_REQUEST", "is empty"},
		{"empty content", "POST", msgs, `{"content":" "}`, 400, "SERVE_BAD_REQUEST", "content is empty"},
		{"bad mode", "POST", msgs, `{"content":"x","mode":"later"}`, 400, "SERVE_BAD_REQUEST", `"steer"`},
		{"too large", "POST", msgs, `{"content":"` + strings.Repeat("x", 300) + `"}`, 413, "SERVE_BODY_TOO_LARGE", "serve.max_body_bytes"},
		{"unknown agent", "POST", "/v1/sessions", `{"agent":"nobody"}`, 400, "SERVE_BAD_REQUEST", "configured agents: main, second"},
		{"unknown preset", "POST", "/v1/sessions", `{"presets":["nope"]}`, 400, "SERVE_BAD_REQUEST", `preset "nope"`},
		{"relative workspace", "POST", "/v1/sessions", `{"workspace":"rel"}`, 400, "SERVE_BAD_REQUEST", "absolute path"},
		{"bad session id", "POST", "/v1/sessions", `{"session_id":"../x"}`, 400, "SERVE_BAD_REQUEST", "letters, digits"},
		{"session exists", "POST", "/v1/sessions", `{"session_id":"` + id + `"}`, 409, "SESSION_LOCKED", "already open"},
		{"unknown session", "POST", "/v1/sessions/nope/messages", `{"content":"x"}`, 404, "SESSION_NOT_FOUND", "GET /v1/sessions"},
		{"unknown session stream", "GET", "/v1/sessions/nope/stream", nil, 404, "SESSION_NOT_FOUND", "nope"},
		{"bad question id", "POST", "/v1/sessions/" + id + "/approvals/x", `{"choice":"deny"}`, 400, "SERVE_BAD_REQUEST", "positive integer"},
		{"bad choice", "POST", "/v1/sessions/" + id + "/approvals/1", `{"choice":"maybe"}`, 400, "SERVE_BAD_REQUEST", `"allow-once"`},
		{"settled question", "POST", "/v1/sessions/" + id + "/approvals/7", `{"choice":"deny"}`, 409, "LIVE_QUESTION_CLOSED", "question 7"},
		{"bad after", "GET", "/v1/sessions/" + id + "/events?after=-1", nil, 400, "SERVE_BAD_REQUEST", "after"},
		{"bad resume point", "GET", "/v1/sessions/" + id + "/stream?after=x", nil, 400, "SERVE_BAD_REQUEST", "resume point"},
		{"seq beyond the log", "GET", "/v1/sessions/" + id + "/stream?after=99", nil, 400, "LIVE_BAD_SEQ", "99"},
		{"no route", "GET", "/v2/nothing", nil, 404, "SERVE_NOT_FOUND", "/openapi.json"},
		{"no method", "PUT", "/v1/sessions", nil, 405, "SERVE_METHOD_NOT_ALLOWED", "GET"},
		{"no hooks", "POST", "/hooks/x", "{}", 404, "SERVE_NOT_FOUND", "serve.webhooks"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.call(c.method, c.path, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			a := r.err(t)
			if a.Code != c.code || !strings.Contains(a.Message, c.says) {
				t.Fatalf("got %s, want code %s saying %q", r.body, c.code, c.says)
			}
		})
	}
	if r := e.call("PUT", "/v1/sessions", nil); r.header.Get("Allow") == "" {
		t.Fatal("405 without Allow")
	}
}

// Without a persistence plugin the API serves the open sessions alone.
func TestWithoutAStore(t *testing.T) {
	e := newEnv(t, envOpts{noStore: true})
	id := e.open(nil)
	var list struct{ Sessions []sessionOut }
	e.call("GET", "/v1/sessions", nil).json(t, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].ID != id || !list.Sessions[0].Open {
		t.Fatalf("list %+v", list)
	}
	e.send(id, "r1", "hello")
	evs := e.waitEvents(id, "turn end", turnsEnded(1))
	var s sessionOut
	r := e.call("POST", "/v1/sessions/"+id+"/close", nil)
	r.json(t, &s)
	if r.status != 200 || s.Open || s.State != "idle" || s.LastSeq != int64(len(evs)) {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/sessions/" + id}, {"POST", "/v1/sessions/" + id + "/resume"}, {"GET", "/v1/sessions/" + id + "/events"}} {
		if r := e.call(c.method, c.path, nil); r.status != http.StatusNotFound {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
	}
}
