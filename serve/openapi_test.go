package serve_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// Every component schema of the document compiles, and a real request to
// every documented route answers with a documented status and a body
// that matches its schema (env.call checks each one).
func TestOpenAPIEveryRouteAnswersAsDocumented(t *testing.T) {
	hooks := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		w.Write([]byte(`{"delivered":true}`))
	})
	e := newEnv(t, envOpts{hooks: hooks, replies: []scripted.Reply{{Text: "hi"}}})
	for name := range e.doc.raw["components"].(map[string]any)["schemas"].(map[string]any) {
		e.doc.schema(t, "#/components/schemas/"+name)
	}
	id := e.open(map[string]any{"session_id": "doc-1"})
	e.send(id, "r1", "hello")
	e.waitEvents(id, "turn end", turnsEnded(1))

	r := e.raw("GET", "/openapi.json", nil, http.Header{})
	if r.status != 200 || r.header.Get("Content-Type") != "application/json" || !strings.Contains(string(r.body), `"openapi"`) {
		t.Fatalf("openapi.json: %d %s", r.status, r.header)
	}
	param := regexp.MustCompile(`\{[a-z]+\}`)
	for path, item := range e.doc.raw["paths"].(map[string]any) {
		for method := range item.(map[string]any) {
			method = strings.ToUpper(method)
			if path == "/v1/sessions/{id}/stream" || (method == "DELETE") {
				continue // the stream never ends by itself; delete is below
			}
			url := param.ReplaceAllStringFunc(path, func(p string) string {
				switch p {
				case "{id}":
					return id
				case "{qid}":
					return "1"
				case "{name}":
					return "github"
				}
				return "app.js"
			})
			var body any
			switch {
			case strings.HasSuffix(path, "/messages"):
				body = map[string]string{"content": "again", "request_id": "doc-2"}
			case strings.Contains(path, "/approvals/"):
				body = map[string]string{"choice": "deny"}
			case method == "POST" && path == "/v1/sessions":
				body = map[string]string{"agent": "main"}
			}
			r := e.call(method, url, body)
			if r.status == http.StatusMethodNotAllowed || (r.status == http.StatusNotFound && strings.Contains(string(r.body), "SERVE_NOT_FOUND") && !strings.HasPrefix(path, "/assets/")) {
				t.Errorf("%s %s is documented and not served: %d %s", method, url, r.status, r.body)
			}
		}
	}
	e.call("POST", "/v1/sessions/"+id+"/close", nil)
	if r := e.call("DELETE", "/v1/sessions/"+id, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
}
