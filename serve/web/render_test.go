package web_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/serve/web"
)

// Markdown renders to the elements a reader expects: headings, emphasis,
// GFM tables with their alignment, highlighted code in a pre.
func TestRenderMarkdown(t *testing.T) {
	out := web.Render("## Result\n\n**bold** and `x`\n\n| a | b |\n|:-|-:|\n| 1 | 2 |\n\n```go\nfunc main() {}\n```\n")
	for _, want := range []string{
		"<h2>Result</h2>", "<strong>bold</strong>", "<code>x</code>",
		`<th align="left">a</th>`, `<td align="right">2</td>`,
		`<pre class="chroma"><code class="language-go">`, `<span class="kd">func</span>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the rendering lacks %s:\n%s", want, out)
		}
	}
}

// HTML in the text shows as text, links go only to http(s) and mailto,
// and nothing of a handler or a script survives.
func TestRenderKeepsHTMLInert(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`<script>alert(1)</script>`, "&lt;script&gt;alert(1)&lt;/script&gt;"},
		{"before <img src=x onerror=alert(1)> after", "before &lt;img src=x onerror=alert(1)&gt; after"},
		{"[click](javascript:alert(1))", "click"},
		{"[mail](mailto:a@b.c)", `<a href="mailto:a@b.c"`},
		{"<div onclick=\"x()\">\nblock\n</div>", `<p class="raw">&lt;div onclick=&#34;x()&#34;&gt;`},
		{"[x](https://example.com)", `<a href="https://example.com" rel="nofollow noreferrer noopener" target="_blank">x</a>`},
		{"![i](javascript:alert(1))", "<p>image: i</p>"},
		{"![chart](https://evil.example/?q=secret)", `<a href="https://evil.example/?q=secret" rel="nofollow noreferrer noopener" target="_blank">image: chart</a>`},
		{"```\"><script>x</script>\nA\n```", `<pre class="chroma"><code class="language-scriptxscript">A`},
	} {
		out := web.Render(c.in)
		if !strings.Contains(out, c.want) {
			t.Errorf("Render(%q) = %q, want it to hold %q", c.in, out, c.want)
		}
		if bad := markup.FindString(strings.ToLower(out)); bad != "" {
			t.Errorf("Render(%q) = %q holds the markup %s", c.in, out, bad)
		}
	}
}

// The stylesheet of code is served with the page, under the policy.
func TestCodeStylesheetIsServed(t *testing.T) {
	res := get(t, web.Handler(), "GET", "/assets/code.css", nil)
	b := body(t, res)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/css; charset=utf-8" || !strings.Contains(b, ".chroma .kd") || !strings.Contains(b, "prefers-color-scheme: dark") {
		t.Fatalf("GET /assets/code.css: %d %q\n%.300s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
}

// markup finds what must never come out of Render as markup: a script,
// an image, a block of raw HTML, a handler or a javascript: URL in a tag.
var markup = regexp.MustCompile(`<(script|img|div|iframe|style)|<[^>]*(\son[a-z]+=|javascript:)`)
