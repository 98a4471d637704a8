package serve_test

import (
	stdctx "context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// counted is a session service that is not *sessions.Controller: it
// forwards each call to one and counts it. // A server given it can reach nothing but the interface, so every route
// working through it, and moving the counts it should, shows that no
// handler reaches around the interface to a controller, a session's
// agent or a store.
type counted struct {
	svc sessions.Service
	mu  sync.Mutex
	n   map[string]int
}

func newCounted(svc sessions.Service) *counted {
	return &counted{svc: svc, n: map[string]int{}}
}

func (c *counted) hit(m string) {
	c.mu.Lock()
	c.n[m]++
	c.mu.Unlock()
}

func (c *counted) count(m string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[m]
}

func (c *counted) Ensure(ctx stdctx.Context, o sessions.EnsureOptions) (sessions.Info, error) {
	c.hit("Ensure")
	return c.svc.Ensure(ctx, o)
}

func (c *counted) Prompt(ctx stdctx.Context, id string, r sessions.PromptRequest) (sessions.Turn, error) {
	c.hit("Prompt")
	t, err := c.svc.Prompt(ctx, id, r)
	return sessions.NewTurn(c, t.Session, t.RequestID, t.MessageID), err
}

func (c *counted) Steer(ctx stdctx.Context, id string, r sessions.PromptRequest) (sessions.Turn, error) {
	c.hit("Steer")
	t, err := c.svc.Steer(ctx, id, r)
	return sessions.NewTurn(c, t.Session, t.RequestID, t.MessageID), err
}

func (c *counted) Wait(ctx stdctx.Context, id, requestID string) (sessions.TurnResult, error) {
	c.hit("Wait")
	return c.svc.Wait(ctx, id, requestID)
}

func (c *counted) Attach(ctx stdctx.Context, id string, o sessions.AttachOptions) (sessions.Stream, error) {
	c.hit("Attach")
	return c.svc.Attach(ctx, id, o)
}

func (c *counted) Cancel(ctx stdctx.Context, id string) error {
	c.hit("Cancel")
	return c.svc.Cancel(ctx, id)
}

func (c *counted) Idle(ctx stdctx.Context, id string) error {
	c.hit("Idle")
	return c.svc.Idle(ctx, id)
}

func (c *counted) Info(ctx stdctx.Context, id string) (sessions.Info, error) {
	c.hit("Info")
	return c.svc.Info(ctx, id)
}

func (c *counted) History(ctx stdctx.Context, id string, after int64) ([]session.Event, error) {
	c.hit("History")
	return c.svc.History(ctx, id, after)
}

func (c *counted) Outcome(ctx stdctx.Context, id, requestID string) (sessions.RequestOutcome, bool, error) {
	c.hit("Outcome")
	return c.svc.Outcome(ctx, id, requestID)
}

func (c *counted) Plan(ctx stdctx.Context, id string, r sessions.PlanRequest) (session.PlanState, error) {
	c.hit("Plan")
	return c.svc.Plan(ctx, id, r)
}

func (c *counted) Attachment(ctx stdctx.Context, id, ref string) (llm.Part, []byte, error) {
	c.hit("Attachment")
	return c.svc.Attachment(ctx, id, ref)
}

func (c *counted) Commands(ctx stdctx.Context, id string) ([]sessions.PromptCommand, error) {
	c.hit("Commands")
	return c.svc.Commands(ctx, id)
}

func (c *counted) Goal(ctx stdctx.Context, id string, r sessions.GoalRequest) (sessions.Goal, error) {
	c.hit("Goal")
	return c.svc.Goal(ctx, id, r)
}

func (c *counted) Find(ctx stdctx.Context, id string) (session.Summary, bool, error) {
	c.hit("Find")
	return c.svc.Find(ctx, id)
}

func (c *counted) List(ctx stdctx.Context) ([]session.Summary, error) {
	c.hit("List")
	return c.svc.List(ctx)
}

func (c *counted) ListPage(ctx stdctx.Context, opts session.ListOptions) (session.Page, error) {
	c.hit("ListPage")
	return c.svc.ListPage(ctx, opts)
}

func (c *counted) Close(ctx stdctx.Context, id string) error {
	c.hit("Close")
	return c.svc.Close(ctx, id)
}

func (c *counted) Delete(ctx stdctx.Context, id string) error {
	c.hit("Delete")
	return c.svc.Delete(ctx, id)
}

// The whole API runs on a session service that is not the controller:
// each route does its work through the service's methods, and a message
// to a session that is closed finds it stored through Find.
func TestTheServerNeedsOnlyTheSessionService(t *testing.T) {
	var c *counted
	e := newEnv(t, envOpts{
		replies: []scripted.Reply{{Text: "hi"}, {ToolCalls: []scripted.Call{{Name: "ask"}}}, {Text: "done"}},
		service: func(ctl *sessions.Controller) sessions.Service { c = newCounted(ctl); return c },
	})
	// step runs do, which must call each of methods at least once.
	step := func(what string, do func(), methods ...string) {
		t.Helper()
		before := map[string]int{}
		for _, m := range methods {
			before[m] = c.count(m)
		}
		do()
		for _, m := range methods {
			if c.count(m) == before[m] {
				t.Fatalf("%s did not call the service's %s", what, m)
			}
		}
	}
	var id string
	// Creating holds the session: its approver is a Stream of the service.
	step("POST /v1/sessions", func() { id = e.open(nil) }, "Ensure", "Attach")
	step("POST .../messages", func() { e.send(id, "r1", "hello") }, "Prompt", "Outcome")
	step("GET .../events", func() { e.waitEvents(id, "turn end", turnsEnded(1)) }, "Info", "History")

	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	step("GET .../stream", func() {
		s := e.stream(ctx, id, nil)
		defer s.close()
		if m, ok := s.next(t); !ok || m.event != "ready" {
			t.Fatalf("the stream began with %q %s", m.event, m.data)
		}
		if m, ok := s.next(t); !ok || m.event != "event" || m.id != "1-0" {
			t.Fatalf("the stream's first event %q id %q", m.event, m.id)
		}
	}, "Attach")

	// A question the server's approver holds, answered over REST; a
	// steering message joins the turn waiting for it.
	e.send(id, "r2", "use the tool")
	q := e.waitQuestion(id)
	step("POST .../messages (steer)", func() {
		r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "r3", "content": "and then stop", "mode": "steer"})
		if r.status != http.StatusAccepted {
			t.Fatalf("steer: %d %s", r.status, r.body)
		}
	}, "Steer")
	if r := e.call("POST", "/v1/sessions/"+id+"/approvals/"+itoa(q), map[string]string{"choice": string(approval.AllowOnce)}); r.status != http.StatusOK {
		t.Fatalf("answer: %d %s", r.status, r.body)
	}
	e.waitEvents(id, "second turn end", turnsEnded(2))

	step("a message with a part", func() {
		r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]any{
			"request_id": "r4", "content": "see", "parts": []map[string]any{{"type": "file", "name": "x.bin", "data": pngOf(t, 4)}},
		})
		if r.status != http.StatusAccepted {
			t.Fatalf("%d %s", r.status, r.body)
		}
		e.waitEvents(id, "third turn end", turnsEnded(3))
	}, "Prompt")
	ref := partRef(t, e, id)
	step("GET .../attachments/{ref}", func() {
		if r := e.call("GET", "/v1/sessions/"+id+"/attachments/"+ref, nil); r.status != http.StatusOK || r.header.Get("Content-Type") != "image/png" {
			t.Fatalf("attachment: %d %s", r.status, r.header.Get("Content-Type"))
		}
	}, "Attachment")

	step("POST .../cancel", func() {
		if r := e.call("POST", "/v1/sessions/"+id+"/cancel", nil); r.status != http.StatusOK {
			t.Fatalf("cancel: %d %s", r.status, r.body)
		}
	}, "Cancel")
	step("GET /v1/sessions/{id}", func() {
		var d sessionOut
		if e.call("GET", "/v1/sessions/"+id, nil).json(t, &d); !d.Open || d.ID != id {
			t.Fatalf("detail %+v", d)
		}
	}, "Info")
	step("GET /v1/sessions", func() {
		var list struct{ Sessions []sessionOut }
		if e.call("GET", "/v1/sessions", nil).json(t, &list); len(list.Sessions) != 1 || !list.Sessions[0].Open {
			t.Fatalf("list %+v", list)
		}
	}, "List")
	// A page is the service's own operation: the server never lists
	// every session to cut one page from them.
	lists := c.count("List")
	step("GET /v1/sessions?limit=", func() {
		var page struct{ Sessions []sessionOut }
		if e.call("GET", "/v1/sessions?limit=1", nil).json(t, &page); len(page.Sessions) != 1 || !page.Sessions[0].Open {
			t.Fatalf("page %+v", page)
		}
	}, "ListPage")
	if n := c.count("List"); n != lists {
		t.Fatalf("a page asked the service for the whole listing %d times", n-lists)
	}
	step("POST .../close", func() {
		if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != http.StatusOK {
			t.Fatalf("close: %d %s", r.status, r.body)
		}
	}, "Close")
	// The service says only that the session is not open; the server
	// tells a stored one from an unknown one.
	step("a message to the closed session", func() {
		r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "r5", "content": "still there?"})
		if r.status != http.StatusConflict || r.err(t).Code != string(sessions.Closed) {
			t.Fatalf("a message to a closed session: %d %s", r.status, r.body)
		}
		r = e.call("POST", "/v1/sessions/nobody/messages", map[string]string{"request_id": "r6", "content": "anyone?"})
		if r.status != http.StatusNotFound || r.err(t).Code != string(sessions.NotFound) {
			t.Fatalf("a message to an unknown session: %d %s", r.status, r.body)
		}
	}, "Prompt", "Find")
	step("DELETE /v1/sessions/{id}", func() {
		if r := e.call("DELETE", "/v1/sessions/"+id, nil); r.status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.status, r.body)
		}
	}, "Delete")

	// A session of its own left open: the shutdown drains and closes it.
	other := e.open(nil)
	e.send(other, "o1", "hello")
	sctx, scancel := stdctx.WithTimeout(stdctx.Background(), patience)
	defer scancel()
	step("Shutdown", func() {
		if err := e.shutdown(sctx); err != nil {
			t.Fatal(err)
		}
	}, "Idle", "Close")
	if _, open := e.h.Sessions().Get(other); open {
		t.Fatal("the shutdown left the session open")
	}
}

// partRef is the ref of the first part in session id's events.
func partRef(t *testing.T, e *env, id string) string {
	t.Helper()
	var page struct {
		Events []struct {
			Message *struct {
				Parts []struct {
					Ref string `json:"ref"`
				} `json:"parts"`
			} `json:"message"`
		} `json:"events"`
	}
	e.call("GET", "/v1/sessions/"+id+"/events", nil).json(t, &page)
	for _, ev := range page.Events {
		if ev.Message == nil {
			continue
		}
		for _, p := range ev.Message.Parts {
			if strings.HasPrefix(p.Ref, "sha256:") {
				return p.Ref
			}
		}
	}
	b, _ := json.Marshal(page)
	t.Fatalf("no part with a ref in %s", b)
	return ""
}

func (c *counted) Rewind(ctx stdctx.Context, id string, r sessions.RewindRequest) (sessions.RewindResult, error) {
	c.hit("Rewind")
	return c.svc.Rewind(ctx, id, r)
}
