package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRunFetchesAndSearchesTheWeb: one turn of dsh run whose scripted
// model calls web_fetch on a local page and web_search on a local stand-in
// of the Brave Search API, with the key from the environment; then a
// fetch of a host the policy denies, which the model sees refused.
func TestRunFetchesAndSearchesTheWeb(t *testing.T) {
	var pageHits, searchHits atomic.Int32
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pageHits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, "<html><head><title>Notes</title></head><body><h1>Release 1.2</h1><p>It fixes <em>bug 42</em>.</p></body></html>")
	}))
	defer site.Close()
	search := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/res/v1/web/search" || r.Header.Get("X-Subscription-Token") != "test-key-77" {
			http.Error(w, "bad request", http.StatusUnauthorized)
			return
		}
		searchHits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"web":{"results":[{"title":"dsh home","url":"https://dsh.example/","description":"about <strong>%s</strong>"}]}}`, r.URL.Query().Get("q"))
	}))
	defer search.Close()

	text := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "looking "
          tool_calls:
            - {name: web_fetch, arguments: '{"url": "%s/notes"}'}
            - {name: web_search, arguments: '{"query": "dsh agents", "count": 1}'}
        - text: "again "
          tool_calls: [{name: web_fetch, arguments: '{"url": "http://denied.example/"}'}]
        - text: done
  - use: tools.web
    config:
      network: {allow: ["127.0.0.1", "*.example"], deny: [denied.example]}
      search: {provider: brave, base_url: %q, api_key_env: WEBTEST_BRAVE_KEY}
agents:
  - id: web
    provider: scripted
log:
  level: warn
`, site.URL, search.URL)
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dshBin, "run", "--config", path, "--allow", "web_fetch", "-p", "what is new?")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=", "WEBTEST_BRAVE_KEY=test-key-77")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	var o outcome
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatal(err)
		}
		o.code = ee.ExitCode()
	}
	o.stdout, o.stderr = stdout.String(), stderr.String()
	if o.code != 0 || pageHits.Load() != 1 || searchHits.Load() != 1 {
		t.Fatalf("exit %d, page fetched %d times, searched %d times\nstdout %q\nstderr %q", o.code, pageHits.Load(), searchHits.Load(), o.stdout, o.stderr)
	}
	for _, want := range []string{"→ web_fetch", "→ web_search", "← URL: " + site.URL + "/notes Content-Type: text/html Title: Notes  # Release 1.2  It fixes *bug 42*.", "1. dsh home", "denied.example:80 is denied by tools.web.network.deny entry"} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, o.stderr)
		}
	}
	if strings.Contains(o.stdout+o.stderr, "test-key-77") {
		t.Fatal("the search key was shown")
	}
	if !strings.Contains(o.stdout, "done") {
		t.Fatalf("stdout %q", o.stdout)
	}
}
