package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// apiCall sends one request with the token and decodes the JSON answer.
func apiCall(t testing.TB, e *env, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("%s %s: %d %s is not JSON", method, path, res.StatusCode, b)
	}
	return res.StatusCode, out
}

// The page's routes: render answers HTML that holds no markup of the
// text's own, pricing the config's table, and a title given to a session
// is listed until it is cleared.
func TestPageRoutes(t *testing.T) {
	e := newEnv(t, envOpts{})
	st, out := apiCall(t, e, "POST", "/v1/render", `{"texts":["# Hi","<script>x()</script>"]}`)
	if html, _ := out["html"].([]any); st != 200 || len(html) != 2 || html[0] != "<h1>Hi</h1>\n" || strings.Contains(html[1].(string), "<script") {
		t.Fatalf("render: %d %v", st, out)
	}
	if st, out := apiCall(t, e, "POST", "/v1/render", `{"text":"x"}`); st != 400 || out["code"] != "SERVE_BAD_REQUEST" {
		t.Fatalf("render with a wrong field: %d %v", st, out)
	}
	st, out = apiCall(t, e, "GET", "/v1/pricing", "")
	models, _ := out["models"].(map[string]any)
	if st != 200 || out["currency"] != "EUR" || models["scripted-1"] == nil {
		t.Fatalf("pricing: %d %v", st, out)
	}
	if st, out := apiCall(t, e, "POST", "/v1/sessions", `{"session_id":"s-1"}`); st != 201 {
		t.Fatalf("open: %d %v", st, out)
	}
	if st, out := apiCall(t, e, "POST", "/v1/sessions/s-1/title", `{"title":"  fix   the build "}`); st != 200 || out["title"] != "fix the build" {
		t.Fatalf("title: %d %v", st, out)
	}
	if st, out := apiCall(t, e, "POST", "/v1/sessions/s-1/title", `{"title":"`+strings.Repeat("x", 81)+`"}`); st != 400 || !strings.Contains(out["message"].(string), "at most 80") {
		t.Fatalf("a long title: %d %v", st, out)
	}
	if st, out := apiCall(t, e, "POST", "/v1/sessions/..%2Fx/title", `{"title":"x"}`); st != 400 {
		t.Fatalf("a title for a bad id: %d %v", st, out)
	}
	st, out = apiCall(t, e, "GET", "/v1/titles", "")
	if titles, _ := out["titles"].(map[string]any); st != 200 || titles["s-1"] != "fix the build" || len(titles) != 1 {
		t.Fatalf("titles: %d %v", st, out)
	}
	apiCall(t, e, "POST", "/v1/sessions/s-1/title", `{"title":""}`)
	if _, out := apiCall(t, e, "GET", "/v1/titles", ""); len(out["titles"].(map[string]any)) != 0 {
		t.Fatalf("a cleared title stays: %v", out)
	}
}
