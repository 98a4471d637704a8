package serve

import (
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/sessions"
)

// The document and the mux agree: every route the mux serves is
// documented with its method, and every documented path and method is
// routed (neither 404 nor 405).
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	s, err := New(Options{Sessions: sessions.New(nil, nil, sessions.Options{}), Config: &config.Config{}, NoAuth: true})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                               `json:"openapi"`
		Paths   map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q", doc.OpenAPI)
	}
	var served, documented []string
	for _, rt := range s.routes {
		served = append(served, rt.method+" "+rt.docPath())
		if _, ok := doc.Paths[rt.docPath()][strings.ToLower(rt.method)]; !ok {
			t.Errorf("%s %s is served and not documented", rt.method, rt.docPath())
		}
		if op := doc.Paths[rt.docPath()][strings.ToLower(rt.method)]; op != nil {
			sec, declared := op["security"].([]any)
			if public := declared && len(sec) == 0; public != rt.public {
				t.Errorf("%s %s: the document says public=%v, the route %v", rt.method, rt.docPath(), public, rt.public)
			}
		}
	}
	param := regexp.MustCompile(`\{[a-z]+\}`)
	for path, item := range doc.Paths {
		for method := range item {
			method = strings.ToUpper(method)
			documented = append(documented, method+" "+path)
			if !slices.Contains(served, method+" "+path) {
				t.Errorf("%s %s is documented and not served", method, path)
			}
			example := param.ReplaceAllStringFunc(path, func(p string) string {
				if p == "{qid}" {
					return "1"
				}
				return "x"
			})
			if _, pattern := s.mux.Handler(httptest.NewRequest(method, example, nil)); pattern == "" {
				t.Errorf("%s %s (as %s) has no route in the mux", method, path, example)
			}
		}
	}
	if len(served) != len(documented) {
		t.Errorf("%d routes served, %d documented", len(served), len(documented))
	}
}
