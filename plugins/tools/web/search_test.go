package web

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/tools"
)

const testKey = "sk-test-0123456789abcdef"

// braveFake is a local stand-in for the Brave Search API as its
// documentation describes it: GET /res/v1/web/search with q and count,
// the key in X-Subscription-Token, results under web.results. It returns
// one more result than asked for, so the tool's own bound is tested.
func braveFake(t *testing.T) string {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/res/v1/web/search" {
			http.Error(w, "not the documented endpoint", http.StatusNotFound)
			return
		}
		if r.Header.Get("X-Subscription-Token") != testKey {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"detail":"invalid token %s"}}`, r.Header.Get("X-Subscription-Token"))
			return
		}
		if r.Header.Get("Accept") != "application/json" {
			http.Error(w, "Accept must be application/json", http.StatusNotAcceptable)
			return
		}
		n, err := strconv.Atoi(r.URL.Query().Get("count"))
		if err != nil || n < 1 || n > 20 {
			http.Error(w, "count must be 1 to 20", http.StatusUnprocessableEntity)
			return
		}
		q := r.URL.Query().Get("q")
		type result struct {
			Title       string `json:"title"`
			URL         string `json:"url"`
			Description string `json:"description"`
		}
		var out struct {
			Type string `json:"type"`
			Web  struct {
				Type    string   `json:"type"`
				Results []result `json:"results"`
			} `json:"web"`
		}
		out.Type, out.Web.Type = "search", "search"
		for i := range n + 1 {
			out.Web.Results = append(out.Web.Results, result{
				Title:       fmt.Sprintf("Result %d &amp; more", i+1),
				URL:         fmt.Sprintf("https://example.com/%d", i+1),
				Description: fmt.Sprintf("About <strong>%s</strong>, part %d.", q, i+1),
			})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out) //nolint:errcheck
	})).URL
}

// tavilyFake is the Tavily Search API as documented: POST /search with a
// JSON body {query, max_results}, a bearer key, results[] with title, url,
// content and score.
func tavilyFake(t *testing.T) string {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/search" || r.Header.Get("Content-Type") != "application/json" {
			http.Error(w, "not the documented endpoint", http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+testKey {
			http.Error(w, `{"detail":{"error":"Unauthorized: missing or invalid API key."}}`, http.StatusUnauthorized)
			return
		}
		var in struct {
			Query      string `json:"query"`
			MaxResults int    `json:"max_results"`
		}
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Query == "" {
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		type result struct {
			Title   string  `json:"title"`
			URL     string  `json:"url"`
			Content string  `json:"content"`
			Score   float64 `json:"score"`
		}
		out := struct {
			Query   string   `json:"query"`
			Results []result `json:"results"`
		}{Query: in.Query}
		for i := range in.MaxResults {
			out.Results = append(out.Results, result{Title: fmt.Sprintf("T%d", i+1), URL: fmt.Sprintf("https://t.example/%d", i+1), Content: "about " + in.Query, Score: 0.9})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out) //nolint:errcheck
	})).URL
}

func newTestSearcher(t *testing.T, cfg SearchConfig, env map[string]string) *searcher {
	t.Helper()
	c := Config{Search: cfg, Tools: []string{SearchTool}}
	if err := c.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	s, err := newSearcher(c.withDefaults().Search, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

func search(t *testing.T, s *searcher, args string) tools.Result {
	t.Helper()
	r, err := s.execute(t.Context(), tools.Call{Name: SearchTool, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBraveSearchReturnsTitlesURLsAndSnippets(t *testing.T) {
	s := newTestSearcher(t, SearchConfig{Provider: "brave", BaseURL: braveFake(t)}, map[string]string{"BRAVE_API_KEY": testKey})
	r := search(t, s, `{"query": "dsh egress", "count": 2}`)
	want := "1. Result 1 & more\n   https://example.com/1\n   About dsh egress, part 1.\n\n" +
		"2. Result 2 & more\n   https://example.com/2\n   About dsh egress, part 2.\n"
	if r.IsError || r.Content != want {
		t.Fatalf("got (error %v)\n%s\nwant\n%s", r.IsError, r.Content, want)
	}
	// The default count is 5, and the provider's extra result is dropped.
	if r := search(t, s, `{"query": "x"}`); strings.Count(r.Content, "https://example.com/") != 5 {
		t.Fatalf("default count: %s", r.Content)
	}
	tool := s.tool()
	if !tool.ParallelSafe || !strings.Contains(string(tool.Parameters), `"maximum":10`) {
		t.Fatalf("web_search must be parallel-safe with count bounded by max_results: %+v", tool)
	}
}

func TestTavilySearch(t *testing.T) {
	s := newTestSearcher(t, SearchConfig{Provider: "tavily", BaseURL: tavilyFake(t), APIKeyEnv: "MY_TAVILY", MaxResults: 3}, map[string]string{"MY_TAVILY": testKey})
	r := search(t, s, `{"query": "go lsp", "count": 3}`)
	if r.IsError || !strings.Contains(r.Content, "3. T3\n   https://t.example/3\n   about go lsp\n") {
		t.Fatalf("got %+v", r)
	}
	if r := search(t, s, `{"query": "go lsp", "count": 4}`); !r.IsError {
		t.Fatalf("a count over max_results must be refused: %s", r.Content)
	}
}

// TestTheKeyIsNeverShown: a provider that refuses the key and echoes it
// back does not hand it to the model; a missing key is an error naming the
// variable.
func TestTheKeyIsNeverShown(t *testing.T) {
	wrong := "sk-wrong-key-5555"
	s := newTestSearcher(t, SearchConfig{Provider: "brave", BaseURL: braveFake(t)}, map[string]string{"BRAVE_API_KEY": wrong})
	r := search(t, s, `{"query": "x"}`)
	if !r.IsError || strings.Contains(r.Content, wrong) || !strings.Contains(r.Content, "answered 401 Unauthorized (the API key was refused") || !strings.Contains(r.Content, "invalid token [key]") {
		t.Fatalf("got %+v", r)
	}
	_, err := newSearcher(SearchConfig{Provider: "brave", MaxResults: 10, Timeout: time.Second}, func(string) string { return "" })
	if !errs.HasCode(err, KeyMissing) || !strings.Contains(err.Error(), "environment variable BRAVE_API_KEY, which is empty or unset") {
		t.Fatalf("missing key: %v", err)
	}
}

func TestAnUnreachableOrBrokenProviderIsAnErrorResult(t *testing.T) {
	broken := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `<html>not json</html>`)
	})).URL
	s := newTestSearcher(t, SearchConfig{Provider: "brave", BaseURL: broken}, map[string]string{"BRAVE_API_KEY": testKey})
	if r := search(t, s, `{"query": "x"}`); !r.IsError || !strings.Contains(r.Content, "is not the JSON it documents") {
		t.Fatalf("got %+v", r)
	}
	slow := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The body read, the server notices the client leave.
		io.Copy(io.Discard, r.Body) //nolint:errcheck
		<-r.Context().Done()
	})).URL
	s = newTestSearcher(t, SearchConfig{Provider: "tavily", BaseURL: slow, Timeout: 200 * time.Millisecond}, map[string]string{"TAVILY_API_KEY": testKey})
	if r := search(t, s, `{"query": "x"}`); !r.IsError || !strings.Contains(r.Content, "did not answer within 200ms") || strings.Contains(r.Content, testKey) {
		t.Fatalf("got %+v", r)
	}
}

func TestConfigErrorsSayWhatToWrite(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Tools: []string{"fetch"}}, `tools[0]: "fetch" is not a tool of tools.web; use web_fetch or web_search`},
		{Config{Tools: []string{SearchTool}}, "tools lists web_search but search.provider is not set; set it to one of brave, tavily"},
		{Config{Search: SearchConfig{Provider: "google"}}, `search.provider is "google"; use one of brave, tavily`},
		{Config{Search: SearchConfig{Provider: "brave", MaxResults: 50}}, "search.max_results is 50, over brave's maximum of 20"},
		{Config{Search: SearchConfig{Provider: "brave", BaseURL: "api.example"}}, `search.base_url is "api.example"; write an http or https URL`},
		{Config{Search: SearchConfig{Provider: "brave", APIKeyEnv: "$KEY"}}, "write the variable's name only"},
		{Config{Network: "off"}, "network is off, so web_fetch could reach nothing"},
		{Config{Network: map[string]any{"allow": []any{"https://x.example"}}}, `tools.web.network.allow[0]: "https://x.example" has a URL scheme`},
		{Config{MaxRedirects: 50}, "max_redirects is 50"},
		{Config{MaxBodyBytes: 10}, "max_body_bytes is 10; set at least 1024"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: want %q, got %v", c.cfg, c.want, err)
		}
	}
	if err := (Config{}.Defaults()).Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
}
