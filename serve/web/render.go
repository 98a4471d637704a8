package web

import (
	"bytes"
	"regexp"
	"strings"
	"sync"

	"github.com/alecthomas/chroma/v2"
	chtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	ghtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// The Markdown a model writes is rendered here, on the server, by three
// well-kept libraries rather than by code of ours: goldmark parses
// CommonMark and GFM tables, chroma highlights fenced code, bluemonday
// keeps only the elements and attributes a chat answer needs. Raw HTML in
// the text is never passed through (goldmark escapes it without
// WithUnsafe), and the sanitizer runs on the output anyway, so a rendering
// bug cannot turn text into markup that runs. The page's CSP is the third
// line: no inline script or handler would run even if both failed.

// MaxRender bounds the text of one Render call; a longer text is cut
// there. It is far above any answer a person reads.
const MaxRender = 1 << 20

// codeFormatter writes chroma's tokens as spans with classes: the page's
// policy forbids inline styles, and CodeCSS holds the colours.
var codeFormatter = chtml.New(chtml.WithClasses(true), chtml.PreventSurroundingPre(true))

// codeRenderer renders fenced and indented code blocks through chroma.
type codeRenderer struct{}

func (codeRenderer) RegisterFuncs(r renderer.NodeRendererFuncRegisterer) {
	r.Register(ast.KindFencedCodeBlock, renderCode)
	r.Register(ast.KindCodeBlock, renderCode)
	r.Register(ast.KindRawHTML, renderRawHTML)
	r.Register(ast.KindHTMLBlock, renderHTMLBlock)
	r.Register(ast.KindImage, renderImage)
}

// renderImage writes an image as a link to it: an image a model names
// would load from wherever the model chose, which is how a prompt
// injection carries data out of a page (the URL holds it). A link loads
// nothing until a person follows it.
func renderImage(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	img := n.(*ast.Image)
	w.WriteString(`<a href="`)
	w.Write(util.EscapeHTML(util.URLEscape(img.Destination, true)))
	w.WriteString(`">image: `)
	var alt bytes.Buffer
	for c := img.FirstChild(); c != nil; c = c.NextSibling() {
		if t, ok := c.(*ast.Text); ok {
			alt.Write(t.Segment.Value(source))
		}
	}
	if alt.Len() == 0 {
		alt.Write(img.Destination)
	}
	w.Write(util.EscapeHTML(alt.Bytes()))
	w.WriteString("</a>")
	return ast.WalkSkipChildren, nil
}

// renderRawHTML shows inline HTML the text holds as the text it is: a
// reader sees what the model wrote ("<script>"), and nothing of it is
// markup.
func renderRawHTML(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	segs := n.(*ast.RawHTML).Segments
	for i := 0; i < segs.Len(); i++ {
		s := segs.At(i)
		w.Write(util.EscapeHTML(s.Value(source)))
	}
	return ast.WalkSkipChildren, nil
}

// renderHTMLBlock is renderRawHTML for a block of HTML: a paragraph of
// its text.
func renderHTMLBlock(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	b := n.(*ast.HTMLBlock)
	w.WriteString("<p class=\"raw\">")
	lines := b.Lines()
	for i := 0; i < lines.Len(); i++ {
		s := lines.At(i)
		w.Write(util.EscapeHTML(s.Value(source)))
	}
	if b.HasClosure() {
		w.Write(util.EscapeHTML(b.ClosureLine.Value(source)))
	}
	w.WriteString("</p>\n")
	return ast.WalkSkipChildren, nil
}

func renderCode(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	var lang string
	if f, ok := n.(*ast.FencedCodeBlock); ok && f.Info != nil {
		lang = string(f.Language(source))
	}
	var code bytes.Buffer
	lines := n.Lines()
	for i := 0; i < lines.Len(); i++ {
		seg := lines.At(i)
		code.Write(seg.Value(source))
	}
	w.WriteString(`<pre class="chroma">`)
	if lang != "" {
		w.WriteString(`<code class="language-`)
		w.Write(util.EscapeHTML([]byte(langClass(lang))))
		w.WriteString(`">`)
	} else {
		w.WriteString(`<code>`)
	}
	lexer := lexers.Get(lang)
	if lexer == nil {
		w.Write(util.EscapeHTML(code.Bytes()))
	} else {
		it, err := chroma.Coalesce(lexer).Tokenise(nil, code.String())
		if err != nil {
			w.Write(util.EscapeHTML(code.Bytes()))
		} else if err := codeFormatter.Format(w, styles.Fallback, it); err != nil {
			return ast.WalkStop, err
		}
	}
	w.WriteString("</code></pre>\n")
	return ast.WalkSkipChildren, nil
}

// langClass keeps a fence's language name to the letters a class may hold.
var notClass = lazyregexp.New(`[^A-Za-z0-9_+#.-]`)

func langClass(lang string) string {
	lang = notClass.ReplaceAllString(lang, "")
	if len(lang) > 32 {
		lang = lang[:32]
	}
	return lang
}

var markdown = goldmark.New(
	goldmark.WithExtensions(
		extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
		extension.Strikethrough, extension.Linkify, extension.TaskList,
	),
	goldmark.WithRendererOptions(
		ghtml.WithHardWraps(),
		renderer.WithNodeRenderers(util.Prioritized(codeRenderer{}, 100)),
	),
)

// sanitizer is what an answer may hold: the user-generated-content policy
// (no script, style, handler or form; links only to http, https and
// mailto, marked nofollow and opened in a new tab), plus the classes
// chroma and the page give code, and table cell alignment.
var sanitizer = sync.OnceValue(func() *bluemonday.Policy {
	p := bluemonday.UGCPolicy()
	p.AllowURLSchemes("http", "https", "mailto")
	p.RequireNoReferrerOnLinks(true)
	p.AddTargetBlankToFullyQualifiedLinks(true)
	p.AllowAttrs("class").Matching(regexp.MustCompile(`^(raw|chroma|language-[A-Za-z0-9_+#.-]{1,32}|[a-z][a-z0-9]{0,3})$`)).OnElements("pre", "code", "span", "p")
	p.AllowAttrs("align").Matching(regexp.MustCompile(`^(left|right|center)$`)).OnElements("th", "td")
	p.AllowAttrs("type", "checked", "disabled").OnElements("input")
	p.AllowElements("input")
	return p
})

// Render turns one Markdown text into sanitized HTML.
func Render(text string) string {
	if len(text) > MaxRender {
		text = text[:MaxRender]
	}
	var out bytes.Buffer
	if err := markdown.Convert([]byte(text), &out); err != nil {
		// goldmark fails only when writing fails, which a buffer does
		// not; show the text as text rather than nothing.
		return "<p>" + string(util.EscapeHTML([]byte(text))) + "</p>"
	}
	return sanitizer().Sanitize(out.String())
}

// CodeCSS is the stylesheet of highlighted code: chroma's classes in a
// light style, and a dark one under prefers-color-scheme.
var CodeCSS = sync.OnceValue(func() []byte {
	var b bytes.Buffer
	b.WriteString("/* Generated by chroma from the styles github and github-dark: the colours of highlighted code. */\n")
	if err := codeFormatter.WriteCSS(&b, styles.Get("github")); err != nil {
		panic("web: writing the code stylesheet: " + err.Error())
	}
	var dark bytes.Buffer
	if err := codeFormatter.WriteCSS(&dark, styles.Get("github-dark")); err != nil {
		panic("web: writing the code stylesheet: " + err.Error())
	}
	b.WriteString("@media (prefers-color-scheme: dark) {\n")
	b.WriteString(strings.ReplaceAll(dark.String(), "\n", "\n  "))
	b.WriteString("}\n")
	return b.Bytes()
})
