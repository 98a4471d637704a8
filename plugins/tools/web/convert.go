package web

import (
	stdctx "context"
	"strings"

	"github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// mdConverter turns HTML into Markdown with html-to-markdown: CommonMark,
// tables and strikethrough; scripts, styles, forms' inputs and the head
// are dropped (its base plugin), and relative links are made absolute
// against the page's URL so the model can fetch them. One converter is
// shared by the calls of a plugin: it keeps no state between conversions.
type mdConverter struct{ c *converter.Converter }

func newConverter() *mdConverter {
	c := converter.NewConverter(converter.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
		strikethrough.NewStrikethroughPlugin(),
	))
	// Navigation and page furniture are not what the model asked for;
	// what the page says is in its main text.
	for _, tag := range []string{"nav", "footer", "svg", "canvas", "button", "select"} {
		c.Register.TagType(tag, converter.TagTypeRemove, converter.PriorityStandard)
	}
	return &mdConverter{c: c}
}

// convert parses page and returns its title and Markdown.
func (c *mdConverter) convert(ctx stdctx.Context, page, base string) (title, md string, err error) {
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		return "", "", err
	}
	title = findTitle(doc)
	out, err := c.c.ConvertNode(doc, converter.WithDomain(base), converter.WithContext(ctx))
	if err != nil {
		return title, "", err
	}
	return title, strings.TrimSpace(string(out)), nil
}

// findTitle returns the text of the first <title>, on one line.
func findTitle(n *html.Node) string {
	if n.Type == html.ElementNode && n.DataAtom == atom.Title {
		var b strings.Builder
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			if c.Type == html.TextNode {
				b.WriteString(c.Data)
			}
		}
		return strings.Join(strings.Fields(b.String()), " ")
	}
	// The title is in the head: stop at the body.
	if n.Type == html.ElementNode && n.DataAtom == atom.Body {
		return ""
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if t := findTitle(c); t != "" {
			return t
		}
	}
	return ""
}
