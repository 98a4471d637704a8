package web_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/serve/web"
)

func get(t *testing.T, h http.Handler, method, path string, header http.Header) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		r.Header[k] = v
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every file comes with its type, an ETag that a revalidation answers with
// 304, and the policy that forbids inline and foreign script.
func TestFilesHaveTypesETagsAndPolicy(t *testing.T) {
	h := web.Handler()
	for path, ctype := range map[string]string{
		"/":                     "text/html; charset=utf-8",
		"/assets/app.js":        "text/javascript; charset=utf-8",
		"/assets/api.js":        "text/javascript; charset=utf-8",
		"/assets/transcript.js": "text/javascript; charset=utf-8",
		"/assets/style.css":     "text/css; charset=utf-8",
		"/assets/icon.svg":      "image/svg+xml",
	} {
		res := get(t, h, "GET", path, nil)
		if res.StatusCode != 200 || res.Header.Get("Content-Type") != ctype {
			t.Errorf("%s: %d %q, want 200 %q", path, res.StatusCode, res.Header.Get("Content-Type"), ctype)
		}
		csp := res.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "default-src 'none'") {
			t.Errorf("%s: policy %q", path, csp)
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" || res.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s: headers %v", path, res.Header)
		}
		etag := res.Header.Get("ETag")
		if etag == "" {
			t.Fatalf("%s: no ETag", path)
		}
		again := get(t, h, "GET", path, http.Header{"If-None-Match": {etag}})
		if again.StatusCode != http.StatusNotModified || body(t, again) != "" {
			t.Errorf("%s: a revalidation with its ETag answered %d", path, again.StatusCode)
		}
	}
	if a, b := get(t, h, "GET", "/assets/app.js", nil).Header.Get("ETag"), get(t, h, "GET", "/assets/api.js", nil).Header.Get("ETag"); a == b {
		t.Errorf("two files share the ETag %s", a)
	}
}

func TestUnknownFilesAndMethodsAreRefused(t *testing.T) {
	h := web.Handler()
	for _, path := range []string{"/assets/nope.js", "/index.html", "/assets/", "/assets/../web.go"} {
		res := get(t, h, "GET", path, nil)
		if res.StatusCode != http.StatusNotFound || res.Header.Get("Content-Type") != "application/json" || !strings.Contains(body(t, res), `"code":"SERVE_NOT_FOUND"`) {
			t.Errorf("GET %s: %d %s, want 404 with a JSON error", path, res.StatusCode, res.Header.Get("Content-Type"))
		}
	}
	res := get(t, h, "POST", "/", nil)
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" || !strings.Contains(body(t, res), `"code":"SERVE_METHOD_NOT_ALLOWED"`) {
		t.Errorf("POST /: %d, Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
	if res := get(t, h, "HEAD", "/", nil); res.StatusCode != 200 || body(t, res) != "" {
		t.Errorf("HEAD /: %d", res.StatusCode)
	}
}

// The page holds no inline script or style (the policy would block it and
// the page would be dead), and everything it loads is served.
func TestPageLoadsOnlyServedFiles(t *testing.T) {
	h := web.Handler()
	page := body(t, get(t, h, "GET", "/", nil))
	if regexp.MustCompile(`<script(?:\s[^>]*)?>\s*[^<\s]`).MatchString(page) || strings.Contains(page, "<style") ||
		regexp.MustCompile(`\s(on[a-z]+|style)=`).MatchString(page) {
		t.Fatal("the page has inline script or style, which its policy blocks")
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(page, -1)
	if len(refs) < 3 {
		t.Fatalf("the page loads only %v", refs)
	}
	for _, ref := range refs {
		if !strings.HasPrefix(ref[1], "/assets/") {
			t.Errorf("the page loads %s, not from /assets/ (it must work offline)", ref[1])
			continue
		}
		if res := get(t, h, "GET", ref[1], nil); res.StatusCode != 200 {
			t.Errorf("the page loads %s: %d", ref[1], res.StatusCode)
		}
	}
	var scripts []string
	for _, f := range mustGlob(t, "static/assets/*.js") {
		scripts = append(scripts, "/assets/"+filepath.Base(f))
	}
	if len(scripts) < 3 {
		t.Fatalf("the page has only the scripts %q", scripts)
	}
	for _, js := range scripts {
		src := body(t, get(t, h, "GET", js, nil))
		for _, imp := range regexp.MustCompile(`from "\./([^"]+)"`).FindAllStringSubmatch(src, -1) {
			if res := get(t, h, "GET", "/assets/"+imp[1], nil); res.StatusCode != 200 {
				t.Errorf("%s imports %s: %d", js, imp[1], res.StatusCode)
			}
		}
		if strings.Contains(src, "innerHTML") || strings.Contains(src, "eval(") {
			t.Errorf("%s writes markup or code from strings; use textContent", js)
		}
	}
}

func mustGlob(t *testing.T, pattern string) []string {
	t.Helper()
	m, err := filepath.Glob(pattern)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
