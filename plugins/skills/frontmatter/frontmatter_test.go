package frontmatter

import (
	"strings"
	"testing"
)

// TestNotYAMLButKeyValueLines: Claude Code's own examples write
// "argument-hint: [pr-number] [priority]", which YAML refuses; it is read
// as the text it looks like, and Raw keeps "[message]", which YAML reads as
// a list, as written.
func TestNotYAMLButKeyValueLines(t *testing.T) {
	d, err := Parse("f.md", []byte("\xef\xbb\xbf---\r\nargument-hint: [pr-number] [priority] [assignee]\r\ndescription: \"Review\"\r\n---\r\nbody\r\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := d.Raw("argument-hint"); h != "[pr-number] [priority] [assignee]" {
		t.Errorf("hint %q", h)
	}
	if s, _, _ := d.String("description"); s != "Review" {
		t.Errorf("description %q", s)
	}
	if d.Body != "body\n" || d.BodyLine != 5 {
		t.Errorf("body %q at %d", d.Body, d.BodyLine)
	}
	d, err = Parse("f.md", []byte("---\nargument-hint: [message]\nallowed-tools: Bash(git add:*), Bash(git status:*), Read\n---\n"), true)
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := d.Raw("argument-hint"); h != "[message]" {
		t.Errorf("hint %q", h)
	}
	if l, _ := d.Strings("allowed-tools"); strings.Join(l, "|") != "Bash(git add:*)|Bash(git status:*)|Read" {
		t.Errorf("allowed-tools %q", l)
	}
}

// TestBrokenFrontMatterNamesTheLine: neither YAML nor key: value lines.
func TestBrokenFrontMatterNamesTheLine(t *testing.T) {
	for text, want := range map[string]string{
		"---\nname: x\nnot a field\n---\n": "f.md:3: the front matter is not valid YAML: could not find expected ':'",
		"---\nname: x\n":                   "f.md:1: the front matter opened on line 1 is never closed",
		"no front matter\n":                "f.md:1: the file does not start with a front matter block",
		"---\n- a\n- b\n---\n":             "f.md:2: the front matter is not a mapping",
	} {
		if _, err := Parse("f.md", []byte(text), true); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %s", text, err, want)
		}
	}
	if d, err := Parse("f.md", []byte("just a prompt\n"), false); err != nil || d.Fields != nil || d.Body != "just a prompt\n" {
		t.Errorf("optional front matter: %+v %v", d, err)
	}
}
