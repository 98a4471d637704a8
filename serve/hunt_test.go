package serve_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/serve"
)

// A title can be given only to a session that exists, and goes with it:
// otherwise any caller could grow the titles file without bound, one
// made-up id at a time, each rewrite of it slower than the last.
func TestATitleNeedsASessionAndGoesWithIt(t *testing.T) {
	e := newEnv(t, envOpts{})
	r := e.call("POST", "/v1/sessions/no-such-session/title", map[string]string{"title": "x"})
	if r.status != http.StatusNotFound || r.err(t).Code != "SESSION_NOT_FOUND" {
		t.Fatalf("a title for an unknown session: %d %s", r.status, r.body)
	}
	id := e.open(map[string]any{})
	e.send(id, "r-1", "hi")
	e.waitEvents(id, "the turn's end", turnsEnded(1))
	if r := e.call("POST", "/v1/sessions/"+id+"/title", map[string]string{"title": "mine"}); r.status != http.StatusOK {
		t.Fatalf("a title for an open session: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if r := e.call("DELETE", "/v1/sessions/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	var out struct{ Titles map[string]string }
	e.call("GET", "/v1/titles", nil).json(t, &out)
	if len(out.Titles) != 0 {
		t.Fatalf("a deleted session's title is still listed: %v", out.Titles)
	}
}

// A request id makes a retry safe; reused for another message, or by
// another caller, it must be refused, not answered with the first
// message's id (the second message silently lost, and the other caller
// told of a message that is not theirs).
func TestARequestIDReusedForAnotherMessageIsRefused(t *testing.T) {
	e := newEnv(t, envOpts{tokens: []serve.Token{
		{Name: "alice", Secret: "alice-secret-0123456789"},
		{Name: "bob", Secret: "bob-secret-0123456789"},
	}})
	id := e.open(map[string]any{})
	as := func(token, content string) response {
		return e.raw("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "r-1", "content": content},
			http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}})
	}
	first := as("alice-secret-0123456789", "hello")
	if first.status != http.StatusAccepted {
		t.Fatalf("first: %d %s", first.status, first.body)
	}
	if again := as("alice-secret-0123456789", "hello"); again.status != http.StatusAccepted {
		t.Fatalf("the same caller's retry: %d %s", again.status, again.body)
	}
	for _, c := range []struct{ who, token, content string }{
		{"another body", "alice-secret-0123456789", "goodbye"},
		{"another caller", "bob-secret-0123456789", "hello"},
	} {
		r := as(c.token, c.content)
		if r.status != http.StatusConflict {
			t.Fatalf("%s: %d %s", c.who, r.status, r.body)
		}
		a := r.err(t)
		if a.Code != "AGENT_REQUEST_ID_REUSED" || !strings.Contains(a.Message, "request_id") || strings.Contains(string(r.body), "hello") {
			t.Fatalf("%s: %+v", c.who, a)
		}
	}
}
