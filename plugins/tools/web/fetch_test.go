package web

import (
	stdctx "context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/egress"
	"github.com/dsh-go/dsh/services/tools"
)

const page = `<!doctype html>
<html><head><title>  The   Page </title><style>body{color:red}</style>
<script>var secret = "script text";</script></head>
<body><nav><a href="/home">Home</a> | <a href="/about">About</a></nav>
<h1>Release notes</h1>
<p>Version <strong>1.2</strong> fixes <a href="/bugs/42">bug 42</a>.</p>
<ul><li>first</li><li>second</li></ul>
<table><tr><th>name</th><th>size</th></tr><tr><td>a</td><td>1</td></tr></table>
<pre><code>go test ./...</code></pre>
</body></html>`

// fetch runs web_fetch as the tools service would: arguments in, result
// out.
func fetch(t *testing.T, f *fetcher, url string) tools.Result {
	t.Helper()
	args, _ := json.Marshal(map[string]string{"url": url})
	r, err := f.execute(t.Context(), tools.Call{Name: FetchTool, Arguments: args})
	if err != nil {
		t.Fatalf("execute returned a Go error: %v", err)
	}
	return r
}

func code(err error) errs.Code {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

func reason(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

func TestHTMLBecomesMarkdownWithAbsoluteLinks(t *testing.T) {
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	}))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test"}}})
	u := at(t, s, "site.test", "/notes")
	r := fetch(t, f, u)
	if r.IsError {
		t.Fatalf("error result: %s", r.Content)
	}
	base := strings.TrimSuffix(u, "/notes")
	for _, want := range []string{
		"URL: " + u + "\n", "Content-Type: text/html\n", "Title: The Page\n",
		"# Release notes", "Version **1.2** fixes [bug 42](" + base + "/bugs/42).",
		"- first\n- second", "| name | size |", "go test ./...",
	} {
		if !strings.Contains(r.Content, want) {
			t.Errorf("the result lacks %q:\n%s", want, r.Content)
		}
	}
	for _, gone := range []string{"script text", "color:red", "About"} {
		if strings.Contains(r.Content, gone) {
			t.Errorf("the result still holds %q (script, style and navigation are dropped):\n%s", gone, r.Content)
		}
	}
}

func TestTextJSONAndCharsetsAreReadAsText(t *testing.T) {
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/json":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"name":"dsh","tags":["<b>"]}`)
		case "/latin1":
			w.Header().Set("Content-Type", "text/plain; charset=iso-8859-1")
			w.Write([]byte("caf\xe9 cr\xe8me")) //nolint:errcheck
		case "/untyped":
			// No Content-Type: the body is sniffed.
			w.Header()["Content-Type"] = nil
			fmt.Fprint(w, "just some words")
		}
	}))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test"}}})
	for path, want := range map[string]string{
		"/json":    "Content-Type: application/json\n\n{\"name\":\"dsh\",\"tags\":[\"<b>\"]}",
		"/latin1":  "Content-Type: text/plain\n\ncafé crème",
		"/untyped": "Content-Type: text/plain\n\njust some words",
	} {
		r := fetch(t, f, at(t, s, "site.test", path))
		if r.IsError || !strings.HasSuffix(r.Content, want) {
			t.Errorf("%s: want a result ending in %q, got (error %v)\n%s", path, want, r.IsError, r.Content)
		}
	}
}

func TestBinaryContentIsRefusedClearly(t *testing.T) {
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/png":
			w.Header().Set("Content-Type", "image/png")
			w.Write(png) //nolint:errcheck
		case "/pdf":
			w.Header().Set("Content-Type", "application/pdf")
			fmt.Fprint(w, "%PDF-1.7")
		case "/sniffed":
			w.Header()["Content-Type"] = nil
			w.Write(png) //nolint:errcheck
		case "/lying":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("text\x00\x01\x02")) //nolint:errcheck
		}
	}))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test"}}})
	for path, want := range map[string]string{
		"/png":     "is an image (image/png), which web_fetch does not read",
		"/pdf":     "is a PDF document (application/pdf)",
		"/sniffed": "sent no content type and its body looks like an image (image/png)",
		"/lying":   "says it is text/plain but its body is not text (it holds NUL bytes)",
	} {
		_, err := f.Fetch(t.Context(), at(t, s, "site.test", path))
		if code(err) != Binary || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want %s with %q, got %v", path, Binary, want, err)
		}
	}
}

func TestRedirectsAreFollowedAndBounded(t *testing.T) {
	var hits atomic.Int32
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if rest, ok := strings.CutPrefix(r.URL.Path, "/r/"); ok {
			n, _ := strconv.Atoi(rest)
			if n <= 0 {
				http.Redirect(w, r, "/final", http.StatusFound)
				return
			}
			http.Redirect(w, r, "/r/"+strconv.Itoa(n-1), http.StatusMovedPermanently)
			return
		}
		if r.URL.Path == "/loop" {
			http.Redirect(w, r, "/loop", http.StatusFound)
			return
		}
		fmt.Fprint(w, "arrived")
	}))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test"}}, MaxRedirects: 3})
	r := fetch(t, f, at(t, s, "site.test", "/r/2"))
	if r.IsError || !strings.Contains(r.Content, "/final (after 3 redirect(s) from ") || !strings.HasSuffix(r.Content, "arrived") {
		t.Fatalf("three redirects within the bound: %s", r.Content)
	}
	hits.Store(0)
	_, err := f.Fetch(t.Context(), at(t, s, "site.test", "/loop"))
	if code(err) != TooManyRedirects || !strings.Contains(err.Error(), "redirected more than 3 times") {
		t.Fatalf("a redirect loop: want %s, got %v", TooManyRedirects, err)
	}
	if n := hits.Load(); n != 4 {
		t.Fatalf("a loop with max_redirects 3 sent %d requests, want 4 (the first and three hops)", n)
	}
}

// TestARedirectToADeniedHostIsRefused: each hop is judged by the policy
// again; the denied host is never resolved nor contacted.
func TestARedirectToADeniedHostIsRefused(t *testing.T) {
	var deniedHits atomic.Int32
	denied := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		deniedHits.Add(1)
		fmt.Fprint(w, "secret")
	}))
	target := at(t, denied, "denied.test", "/x")
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusFound)
	}))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test", "*.test"}, "deny": []any{"denied.test"}}})
	start := at(t, s, "site.test", "/go")
	r := fetch(t, f, start)
	want := start + " redirected to " + target + ", which was not fetched: dsh egress policy: denied.test:"
	if !r.IsError || !strings.Contains(r.Content, want) || !strings.Contains(r.Content, `is denied by tools.web.network.deny entry "denied.test"`) {
		t.Fatalf("want an error result with %q, got %+v", want, r)
	}
	if deniedHits.Load() != 0 || dns.lookedUp("denied.test") {
		t.Fatalf("the denied host was contacted (%d) or resolved (%v)", deniedHits.Load(), dns.lookedUp("denied.test"))
	}
	// A redirect to a local address the policy does not name: refused too.
	s2 := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
	}))
	_, err := f.Fetch(t.Context(), at(t, s2, "site.test", "/meta"))
	if code(err) != egress.Refused {
		t.Fatalf("a redirect to the metadata address: want %s, got %v", egress.Refused, err)
	}
}

func TestADeniedDomainIsNeverResolvedNorContacted(t *testing.T) {
	var hits atomic.Int32
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"*"}, "deny": []any{"denied.test"}}})
	_, err := f.Fetch(t.Context(), at(t, s, "denied.test", "/"))
	if code(err) != egress.Refused || reason(err) != egress.ReasonDeniedName || !strings.Contains(err.Error(), "was not fetched: dsh egress policy: denied.test:") {
		t.Fatalf("want %s/%s, got %v", egress.Refused, egress.ReasonDeniedName, err)
	}
	// Not in the allow list at all: refused the same way.
	f2 := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test"}}})
	_, err = f2.Fetch(t.Context(), at(t, s, "other.test", "/"))
	if reason(err) != egress.ReasonNotAllowed || !strings.Contains(err.Error(), "is not in tools.web.network.allow") {
		t.Fatalf("a host outside the allow list: got %v", err)
	}
	if hits.Load() != 0 || dns.lookedUp("denied.test") {
		t.Fatalf("a refused host was contacted (%d) or resolved", hits.Load())
	}
}

// TestLocalAddressesAreRefusedUnlessAllowed: with "*" (the default),
// loopback, private and link-local addresses are refused, on the address
// the name resolves to when it is dialled, not only on the name.
func TestLocalAddressesAreRefusedUnlessAllowed(t *testing.T) {
	var hits atomic.Int32
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "local service")
	}))
	f := newTestFetcher(t, Config{}) // network: on
	for _, c := range []struct{ url, want string }{
		{s.URL + "/", "127.0.0.1:" + s.URL[strings.LastIndex(s.URL, ":")+1:] + " is a loopback address"},
		{at(t, s, "rebind.test", "/"), "resolves to 127.0.0.1, a loopback address"},
		{at(t, s, "private.test", "/"), "resolves to 10.1.2.3, a private address"},
		{at(t, s, "mixed.test", "/"), "a loopback address"},
		{"http://169.254.169.254/latest/meta-data/", "is a link-local address"},
		{"http://[::1]:9/", "is a loopback address"},
	} {
		_, err := f.Fetch(t.Context(), c.url)
		if code(err) != egress.Refused || reason(err) != egress.ReasonLocalAddress || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: want %s/%s with %q, got %v", c.url, egress.Refused, egress.ReasonLocalAddress, c.want, err)
		}
	}
	if hits.Load() != 0 || len(dials.nonLoopback()) != 0 {
		t.Fatalf("a local address was contacted: %d requests, dials %v", hits.Load(), dials.nonLoopback())
	}
	// Named by the policy, the same local server is reached.
	for _, allow := range [][]any{{"*", "127.0.0.1"}, {"rebind.test"}} {
		f := newTestFetcher(t, Config{Network: map[string]any{"allow": allow}})
		u := s.URL + "/"
		if allow[0] == "rebind.test" {
			u = at(t, s, "rebind.test", "/")
		}
		if r := fetch(t, f, u); r.IsError || !strings.HasSuffix(r.Content, "local service") {
			t.Fatalf("allow %v: %s", allow, r.Content)
		}
	}
}

func TestALargeBodyIsCappedAndNotDownloaded(t *testing.T) {
	var sent atomic.Int64
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		line := []byte(strings.Repeat("x", 1023) + "\n")
		// Up to 256 MiB, unless the client goes away first.
		for range 256 << 10 {
			n, err := w.Write(line)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test"}}, MaxBodyBytes: 64 << 10, MaxOutputBytes: 4096})
	start := time.Now()
	r := fetch(t, f, at(t, s, "site.test", "/big"))
	if r.IsError {
		t.Fatalf("error: %s", r.Content)
	}
	for _, want := range []string{
		"[... 61440 more bytes of text cut here: web_fetch returns at most 4096 bytes]",
		"[the body is longer than 65536 bytes; only that much was read]",
	} {
		if !strings.Contains(r.Content, want) {
			t.Errorf("the result lacks %q", want)
		}
	}
	if len(r.Content) > 4096+400 {
		t.Errorf("the result is %d bytes, over max_output_bytes and its notes", len(r.Content))
	}
	// The connection is dropped, not drained: the server stops far short
	// of its 256 MiB (socket buffers hold a few MiB at most).
	deadline := time.Now().Add(5 * time.Second)
	for prev := int64(-1); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if n := sent.Load(); n == prev {
			break
		} else {
			prev = n
		}
	}
	if n := sent.Load(); n > 64<<20 {
		t.Fatalf("the server sent %d bytes: the body was drained past the cap", n)
	}
	t.Logf("capped fetch took %s; server wrote %d bytes", time.Since(start), sent.Load())
}

func TestSlowAnswersTimeOut(t *testing.T) {
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow-body" {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprint(w, "first bytes ")
			w.(http.Flusher).Flush()
		}
		// Then nothing until the client gives up.
		<-r.Context().Done()
	}))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test"}}, Timeout: 300 * time.Millisecond})
	for path, want := range map[string]string{
		"/slow-body":    "did not finish sending within 300ms (tools.web timeout); 12 bytes had arrived",
		"/slow-headers": "did not answer within 300ms (tools.web timeout)",
	} {
		start := time.Now()
		_, err := f.Fetch(t.Context(), at(t, s, "site.test", path))
		if code(err) != Timeout || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: want %s with %q, got %v", path, Timeout, want, err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Errorf("%s: the timeout of 300ms took %s", path, d)
		}
	}
}

func TestAnErrorStatusIsAnErrorResultWithThePage(t *testing.T) {
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, "<h1>No such page</h1>")
	}))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test"}}})
	r := fetch(t, f, at(t, s, "site.test", "/gone"))
	if !r.IsError || !strings.Contains(r.Content, "answered 404 Not Found") || !strings.Contains(r.Content, "# No such page") {
		t.Fatalf("want an error result with the status and the page: %+v", r)
	}
}

func TestBadURLsAreRefusedBeforeAnyConnection(t *testing.T) {
	f := newTestFetcher(t, Config{})
	for raw, want := range map[string]string{
		"ftp://site.test/file":                          "is not an http or https URL",
		"site.test/page":                                "is not an http or https URL",
		"http:///path":                                  "has no host",
		"https://user:pw@site.test/":                    "carries a user name or password",
		"http://bad host.test/":                         "is not a URL",
		"file:///etc/passwd":                            "is not an http or https URL",
		"http://site.test:99999/":                       "",
		"javascript:alert(1)":                           "is not an http or https URL",
		"http://" + strings.Repeat("a", 300) + ".test/": "",
	} {
		_, err := f.Fetch(t.Context(), raw)
		if err == nil || (want != "" && !strings.Contains(err.Error(), want)) {
			t.Errorf("%q: want an error with %q, got %v", raw, want, err)
		}
		if strings.Contains(fmt.Sprint(err), "pw@") {
			t.Errorf("%q: the password is echoed: %v", raw, err)
		}
	}
}

func TestACancelledTurnEndsTheFetch(t *testing.T) {
	s := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"site.test"}}})
	ctx, cancel := stdctx.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	args, _ := json.Marshal(map[string]string{"url": at(t, s, "site.test", "/")})
	_, err := f.execute(ctx, tools.Call{Name: FetchTool, Arguments: args})
	if !errors.Is(err, stdctx.DeadlineExceeded) {
		t.Fatalf("a cancelled call must return the context's error, got %v", err)
	}
}

// TestHTTPSGoesThroughTheSameDial: an https URL is fetched over TLS (and
// HTTP/2) with the certificate checked against the URL's name, on a
// connection the policy judged like any other.
func TestHTTPSGoesThroughTheSameDial(t *testing.T) {
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "over %s", r.Proto)
	}))
	s.EnableHTTP2 = true
	s.StartTLS()
	t.Cleanup(s.Close)
	pool := x509.NewCertPool()
	pool.AddCert(s.Certificate())
	// httptest's certificate names example.com, which the test resolver
	// maps to loopback.
	f := newTestFetcher(t, Config{Network: map[string]any{"allow": []any{"example.com", "site.test"}}})
	f.tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	r := fetch(t, f, at(t, s, "example.com", "/"))
	if r.IsError || !strings.HasSuffix(r.Content, "over HTTP/2.0") {
		t.Fatalf("got %+v", r)
	}
	// A name the certificate does not carry fails the handshake.
	r = fetch(t, f, at(t, s, "site.test", "/"))
	if !r.IsError || !strings.Contains(r.Content, "certificate") {
		t.Fatalf("a certificate for another name must be refused: %+v", r)
	}
	g := newTestFetcher(t, Config{})
	if _, err := g.Fetch(t.Context(), at(t, s, "example.com", "/")); code(err) != egress.Refused {
		t.Fatalf("https to a loopback address under the default policy: %v", err)
	}
}
