package web

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system time so far: the server's and the
// client's, which share the process in both benchmarks alike.
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchPage is a documentation page of about 30 KB: headings, paragraphs
// with links and emphasis, lists, a table, code, and the navigation,
// scripts and styles web_fetch drops.
func benchPage() string {
	var b strings.Builder
	b.WriteString(`<!doctype html><html><head><title>Reference</title><style>body{font:14px sans-serif}</style><script>window.x=1</script></head><body>`)
	b.WriteString(`<nav><a href="/">Home</a> <a href="/docs">Docs</a> <a href="/blog">Blog</a></nav><main>`)
	for i := range 20 {
		fmt.Fprintf(&b, `<h2 id="s%d">Section %d</h2>`, i, i)
		fmt.Fprintf(&b, `<p>The <em>option %d</em> sets how the <a href="/docs/opt%d">agent</a> reads its <code>config.yaml</code>; see <strong>limits</strong> for the bounds that apply.</p>`, i, i)
		b.WriteString(`<ul><li>first item with <a href="https://example.com/a">a link</a></li><li>second item</li><li>third item</li></ul>`)
		if i%4 == 0 {
			b.WriteString(`<table><tr><th>key</th><th>default</th><th>meaning</th></tr><tr><td>timeout</td><td>30s</td><td>one fetch</td></tr><tr><td>max</td><td>5 MiB</td><td>body read</td></tr></table>`)
			b.WriteString(`<pre><code>dsh run --config config.yaml -p "hello"</code></pre>`)
		}
	}
	b.WriteString(`</main><footer>© dsh</footer></body></html>`)
	return b.String()
}

// BenchmarkFetch is web_fetch's overhead against a plain Go HTTP GET of
// the same page from the same local server: the policy's decision per new
// connection, the capped read, the charset check and the conversion to
// Markdown. The plain GET reads the body and does nothing with it.
func BenchmarkFetch(b *testing.B) {
	page := benchPage()
	s := serveBench(b, page)
	b.Run("plain-get", func(b *testing.B) {
		client := &http.Client{Transport: &http.Transport{}}
		defer client.CloseIdleConnections()
		b.ReportAllocs()
		cpu := cpuTime(b)
		for b.Loop() {
			resp, err := client.Get(s + "/page")
			if err != nil {
				b.Fatal(err)
			}
			if n, _ := io.Copy(io.Discard, resp.Body); n != int64(len(page)) {
				b.Fatalf("read %d bytes", n)
			}
			resp.Body.Close()
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
	for _, c := range []struct{ name, path string }{{"web_fetch-html", "/page"}, {"web_fetch-text", "/text"}} {
		b.Run(c.name, func(b *testing.B) {
			cfg := Config{Network: map[string]any{"allow": []any{"127.0.0.1"}}}.withDefaults()
			p, err := cfg.policy()
			if err != nil {
				b.Fatal(err)
			}
			f := newFetcher(cfg, p)
			defer f.close()
			b.ReportAllocs()
			cpu := cpuTime(b)
			for b.Loop() {
				pg, err := f.Fetch(b.Context(), s+c.path)
				if err != nil || pg.Text == "" {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

func serveBench(b *testing.B, page string) string {
	b.Helper()
	s := serve(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/text" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		} else {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		}
		io.WriteString(w, page) //nolint:errcheck
	}))
	return s.URL
}
