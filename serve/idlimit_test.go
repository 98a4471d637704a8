package serve_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// An id that fits no store is refused at open, naming the limit, instead
// of being accepted and failing at the first flush with the session wedged.
func TestSessionIDLongerThanStoresTake(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{Text: "ok"}}})
	for _, n := range []int{129, 246, 250, 300} {
		id := strings.Repeat("a", n)
		r := e.call("POST", "/v1/sessions", map[string]any{"session_id": id})
		if r.status != http.StatusBadRequest {
			t.Fatalf("id of %d characters: %d %s", n, r.status, r.body)
		}
		if a := r.err(t); !strings.Contains(a.Message, "128") {
			t.Fatalf("id of %d characters: the message does not name the limit: %s", n, r.body)
		}
	}
	// The longest id allowed lives a whole life: prompted, closed (flushed),
	// resumed, deleted.
	id := strings.Repeat("b", 128)
	if r := e.call("POST", "/v1/sessions", map[string]any{"session_id": id}); r.status != http.StatusCreated {
		t.Fatalf("open: %d %s", r.status, r.body)
	}
	e.send(id, "r1", "hi")
	e.waitEvents(id, "turn end", turnsEnded(1))
	if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != 200 {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/resume", nil); r.status != 200 {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != 200 {
		t.Fatalf("close again: %d %s", r.status, r.body)
	}
	if r := e.call("DELETE", "/v1/sessions/"+id, nil); r.status != http.StatusNoContent && r.status != 200 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
}
