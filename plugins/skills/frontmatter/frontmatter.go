// Package frontmatter splits a Markdown file into its YAML front matter and
// its body, as SKILL.md files and Claude Code command files are written,
// and reports every problem with the file and line it is on, so a user can
// fix the file without guessing.
package frontmatter

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"go.yaml.in/yaml/v3"
)

// Invalid is the code of every error this package returns.
const Invalid errs.Code = "FRONTMATTER_INVALID"

// Doc is a parsed file.
type Doc struct {
	// File names the file in errors.
	File string
	// Fields is the front matter's top-level mapping; nil when the file
	// has none.
	Fields *yaml.Node
	// Body is the text after the front matter.
	Body string
	// BodyLine is the 1-based line the body starts on.
	BodyLine int
	// lines are the front matter's lines, for Raw.
	lines []string
}

// Raw is the text after "key:" on the key's line, as written: for fields
// such as argument-hint whose value is display text even where YAML
// would read a list ("[message]").
func (d *Doc) Raw(key string) (string, bool) {
	if d.Fields == nil {
		return "", false
	}
	for i := 0; i+1 < len(d.Fields.Content); i += 2 {
		k := d.Fields.Content[i]
		if k.Value != key {
			continue
		}
		if v := d.Fields.Content[i+1]; v.Kind == yaml.ScalarNode || k.Line < 1 || k.Line > len(d.lines) {
			return v.Value, true
		}
		_, after, _ := strings.Cut(d.lines[k.Line-1], ":")
		return strings.TrimSpace(after), true
	}
	return "", false
}

// flatLines reads front matter that is not YAML as "key: value" lines,
// each value the rest of its line with surrounding quotes removed; ok is
// false when a line is neither that, blank nor a comment.
func flatLines(lines []string) (*yaml.Node, bool) {
	m := &yaml.Node{Kind: yaml.MappingNode}
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		k, v, found := strings.Cut(l, ":")
		if !found || k != strings.TrimSpace(k) || k == "" || strings.ContainsAny(k, " \t") {
			return nil, false
		}
		v = strings.TrimSpace(v)
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		m.Content = append(m.Content,
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: k, Line: i + 1},
			&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: v, Line: i + 1})
	}
	return m, true
}

// Parse splits text. With required set, a file that does not open with a
// "---" line is an error; otherwise it is all body.
func Parse(file string, text []byte, required bool) (*Doc, error) {
	text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf"))
	s := strings.ReplaceAll(string(text), "\r\n", "\n")
	first, rest, _ := strings.Cut(s, "\n")
	if strings.TrimRight(first, " \t") != "---" {
		if required {
			return nil, Errorf(file, 1, "the file does not start with a front matter block; begin it with a line \"---\", then the YAML fields (name:, description:), then another \"---\"")
		}
		return &Doc{File: file, Body: s, BodyLine: 1}, nil
	}
	// Find the closing line.
	line := 2
	var yamlText strings.Builder
	for {
		l, more, found := strings.Cut(rest, "\n")
		if strings.TrimRight(l, " \t") == "---" {
			rest = more
			break
		}
		if !found {
			return nil, Errorf(file, 1, "the front matter opened on line 1 is never closed; end it with a line \"---\"")
		}
		yamlText.WriteString(l)
		yamlText.WriteByte('\n')
		rest = more
		line++
	}
	d := &Doc{File: file, Body: rest, BodyLine: line + 1, lines: strings.Split(yamlText.String(), "\n")}
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(yamlText.String()), &root); err != nil {
		// Claude Code reads "argument-hint: [pr-number] [priority]",
		// which is not YAML, as the text it looks like: so does dsh,
		// for front matter of plain "key: value" lines.
		flat, ok := flatLines(d.lines)
		if !ok {
			at, msg := yamlLine(err.Error())
			return nil, errs.New(Invalid, fmt.Sprintf("%s:%d: the front matter is not valid YAML: %s", file, at+1, msg)).WithReason("frontmatter/yaml")
		}
		d.Fields = flat
		return d, nil
	}
	if len(root.Content) == 0 {
		return d, nil // "---\n---": empty front matter
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil, Errorf(file, m.Line+1, "the front matter is not a mapping of fields (key: value)")
	}
	d.Fields = m
	return d, nil
}

// Field returns the value node of key and whether it is there.
func (d *Doc) Field(key string) (*yaml.Node, bool) {
	if d.Fields == nil {
		return nil, false
	}
	for i := 0; i+1 < len(d.Fields.Content); i += 2 {
		if d.Fields.Content[i].Value == key {
			return d.Fields.Content[i+1], true
		}
	}
	return nil, false
}

// Keys returns the front matter's keys in order, each with its file line.
func (d *Doc) Keys() []Key {
	if d.Fields == nil {
		return nil
	}
	var out []Key
	for i := 0; i+1 < len(d.Fields.Content); i += 2 {
		out = append(out, Key{Name: d.Fields.Content[i].Value, Line: d.Line(d.Fields.Content[i])})
	}
	return out
}

// Key is one front matter key and where it is.
type Key struct {
	Name string
	Line int
}

// Line is n's line in the file.
func (d *Doc) Line(n *yaml.Node) int { return n.Line + 1 }

// String reads key as a string scalar; "" and false when it is absent.
func (d *Doc) String(key string) (string, bool, error) {
	n, ok := d.Field(key)
	if !ok {
		return "", false, nil
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "", true, Errorf(d.File, d.Line(n), "%s must be a text value", key)
	}
	return n.Value, true, nil
}

// Strings reads key as a list of strings, or as one string split by
// sep (" " or ","), as the formats allow either.
func (d *Doc) Strings(key string) ([]string, error) {
	n, ok := d.Field(key)
	if !ok || n.Tag == "!!null" {
		return nil, nil
	}
	switch n.Kind {
	case yaml.ScalarNode:
		return splitList(n.Value), nil
	case yaml.SequenceNode:
		out := make([]string, 0, len(n.Content))
		for _, c := range n.Content {
			if c.Kind != yaml.ScalarNode {
				return nil, Errorf(d.File, d.Line(c), "%s must list text values", key)
			}
			out = append(out, c.Value)
		}
		return out, nil
	}
	return nil, Errorf(d.File, d.Line(n), "%s must be a text value or a list of them", key)
}

// StringMap reads key as a mapping of strings to strings.
func (d *Doc) StringMap(key string) (map[string]string, error) {
	n, ok := d.Field(key)
	if !ok || n.Tag == "!!null" {
		return nil, nil
	}
	if n.Kind != yaml.MappingNode {
		return nil, Errorf(d.File, d.Line(n), "%s must be a mapping of keys to text values", key)
	}
	out := map[string]string{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		v := n.Content[i+1]
		if v.Kind != yaml.ScalarNode {
			return nil, Errorf(d.File, d.Line(v), "%s.%s must be a text value", key, n.Content[i].Value)
		}
		out[n.Content[i].Value] = v.Value
	}
	return out, nil
}

// Errorf is an error about file at line.
func Errorf(file string, line int, format string, args ...any) error {
	return errs.New(Invalid, fmt.Sprintf("%s:%d: %s", file, line, fmt.Sprintf(format, args...))).WithReason("frontmatter/field")
}

var lineRef = lazyregexp.New(`^yaml: line (\d+): `)

// yamlLine splits the YAML parser's "yaml: line N: what" into N, counted
// from the front matter's first line, and what; N is 0 when the message
// names no line.
func yamlLine(msg string) (int, string) {
	m := lineRef.FindStringSubmatch(msg)
	if m == nil {
		return 0, strings.TrimPrefix(msg, "yaml: ")
	}
	n, _ := strconv.Atoi(m[1])
	return n, msg[len(m[0]):]
}

// splitList splits a one-line list on spaces and commas, but not inside
// parentheses: "Bash(git add:*), Read" is two entries.
func splitList(s string) []string {
	var out []string
	var cur strings.Builder
	depth := 0
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for _, r := range s {
		switch {
		case r == '(':
			depth++
		case r == ')' && depth > 0:
			depth--
		case depth == 0 && (r == ' ' || r == ',' || r == '\t' || r == '\n'):
			flush()
			continue
		}
		cur.WriteRune(r)
	}
	flush()
	return out
}
