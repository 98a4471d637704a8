package main

import (
	"strings"
	"testing"

	"github.com/muesli/termenv"
)

// blocks streams text into an mdStream in pieces of n bytes and returns
// what was printed after each piece, the blocks rendered as [md].
func blocks(text string, n int) []string {
	m := &mdStream{render: func(md string) string { return "[" + md + "]\n" }}
	var out []string
	for len(text) > 0 {
		k := min(n, len(text))
		if s := m.write(text[:k]); s != "" {
			out = append(out, s)
		}
		text = text[k:]
	}
	if s := m.flush(); s != "" {
		out = append(out, s)
	}
	return out
}

func TestMarkdownIsPrintedBlockByBlock(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string
	}{
		{"a paragraph ends at a blank line", "one\ntwo\n\nthree", []string{"[one\ntwo]\n", "\n[three]\n"}},
		{"a heading is a block at once", "# Title\nbody", []string{"[# Title]\n", "\n[body]\n"}},
		{"a fence waits for its end, blank lines and all", "```go\na\n\nb\n```\nafter\n", []string{"[```go\na\n\nb\n```]\n", "\n[after]\n"}},
		{"a list keeps its loose items together", "- a\n\n- b\n\nnext\n", []string{"[- a\n\n- b]\n", "\n[next]\n"}},
		{"an unclosed fence is closed at the end", "```\ncode", []string{"[```\ncode\n```]\n"}},
		{"a table is one block", "| a | b |\n|---|---|\n| 1 | 2 |\n", []string{"[| a | b |\n|---|---|\n| 1 | 2 |]\n"}},
	}
	for _, c := range cases {
		for _, n := range []int{1, 3, len(c.text)} {
			if got := blocks(c.text, n); strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("%s, in pieces of %d: got %q, want %q", c.name, n, got, c.want)
			}
		}
	}
}

func TestALongFenceIsPrintedInParts(t *testing.T) {
	var src strings.Builder
	src.WriteString("```\n")
	for range 2*fenceChunk + 5 {
		src.WriteString("x\n")
	}
	src.WriteString("```\n")
	got := blocks(src.String(), 1)
	if len(got) != 3 {
		t.Fatalf("a fence of %d lines was printed in %d parts, want 3: %q", 2*fenceChunk+5, len(got), got)
	}
	for _, part := range got {
		if !strings.Contains(part, "[```") || !strings.HasSuffix(part, "```]\n") {
			t.Fatalf("a part is not a fence of its own: %q", part)
		}
	}
}

func TestOpenBlockIsWhatStreamed(t *testing.T) {
	m := &mdStream{render: func(md string) string { return md + "\n" }}
	m.write("first line\nsecond ha")
	if got := m.open(); got != "first line\nsecond ha" {
		t.Fatalf("open = %q", got)
	}
	m.write("lf\n\n")
	if got := m.open(); got != "" {
		t.Fatalf("open after the block ended = %q", got)
	}
}

func TestRenderedBlockHasNoPaddingAndNoEscapesFromTheModel(t *testing.T) {
	md := &markdown{profile: termenv.ANSI256}
	out := md.render("Some **bold** and \x1b]52;c;aGk=\x07 `code`", 80)
	if strings.Contains(out, "\x1b]52") || strings.Contains(out, "\x07") {
		t.Fatalf("a control sequence of the model's text reached the terminal: %q", out)
	}
	if strings.Contains(out, "**") || !strings.Contains(out, "bold") {
		t.Fatalf("not rendered: %q", out)
	}
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if plain := csi.ReplaceAllString(l, ""); strings.HasSuffix(plain, " ") || plain == "" {
			t.Fatalf("a padded or blank line %q in %q", plain, out)
		}
	}
}

func TestToolSummaryNamesWhatTheCallWorksOn(t *testing.T) {
	cases := []struct{ name, args, want string }{
		{"bash", `{"command": "ls -la\n  /tmp", "timeout": 5}`, "bash ls -la /tmp"},
		{"edit", `{"path": "a.go", "old": "x", "new": "y"}`, "edit a.go"},
		{"grep", `{"pattern": "TODO"}`, "grep TODO"},
		{"clock", `{}`, "clock"},
		{"odd", `{"n": 3}`, `odd {"n": 3}`},
	}
	for _, c := range cases {
		if got := toolSummary(c.name, c.args, 80); got != c.want {
			t.Errorf("toolSummary(%s, %s) = %q, want %q", c.name, c.args, got, c.want)
		}
	}
	if got := toolSummary("bash", `{"command": "`+strings.Repeat("x", 500)+`"}`, 40); csiLen(got) > 40 {
		t.Errorf("a long summary is not cut to the width: %d columns", csiLen(got))
	}
}

func csiLen(s string) int { return len([]rune(csi.ReplaceAllString(s, ""))) }

func TestToolPreviewShowsTheFirstLinesAndColoursDiffs(t *testing.T) {
	out := toolPreview("1\n2\n3\n4\n5\n6\nexit code: 0", false, 7, 80)
	plain := csi.ReplaceAllString(out, "")
	if plain != "  ⎿ 1\n    2\n    3\n    4\n    … 3 more lines (/expand 7)\n" {
		t.Fatalf("preview:\n%s", plain)
	}
	diff := toolPreview("edited a.txt: 1 replacement\n--- a.txt\n+++ a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n", false, 1, 80)
	if !strings.Contains(diff, sgrRed+"-two") || !strings.Contains(diff, sgrGreen+"+TWO") || !strings.Contains(diff, sgrCyan+"@@") {
		t.Fatalf("the diff is not coloured: %q", diff)
	}
	if e := toolPreview("no such file", true, 2, 80); !strings.Contains(e, sgrRed+"no such file") {
		t.Fatalf("an error is not red: %q", e)
	}
}

func TestExpandShowsAKeptOutputWhole(t *testing.T) {
	o := &toolOutputs{}
	for i := range keptOutputs + 5 {
		o.add("bash n", strings.Repeat("line\n", i+1), false)
	}
	if got := o.expand(""); strings.Count(got, "line\n") != keptOutputs+5 || !strings.Contains(got, "#105 bash n") {
		t.Fatalf("/expand shows %q", got)
	}
	if got := o.expand("50"); strings.Count(got, "line\n") != 50 {
		t.Fatalf("/expand 50 shows %q", got)
	}
	if got := o.expand("3"); !strings.Contains(got, "no tool output 3: the last 100 are kept (6 to 105)") {
		t.Fatalf("/expand of a dropped output: %q", got)
	}
	if got := o.expand("x"); !strings.Contains(got, "usage: /expand [N]") {
		t.Fatalf("/expand x: %q", got)
	}
}
