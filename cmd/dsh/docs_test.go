package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// fragmentMark before a YAML block says it is a piece of a config (an
// entry, a block to paste under a key), not a whole one: it must still be
// YAML, but `dsh config check` does not run on it.
const fragmentMark = "<!-- fragment -->"

// docSnippet is one fenced YAML block of a Markdown file.
type docSnippet struct {
	file     string
	line     int
	body     string
	fragment bool
}

var fenceOpen = regexp.MustCompile("^```(ya?ml)\\s*$")

// yamlSnippets returns the YAML blocks of a Markdown text, each marked
// fragment when the nearest non-blank line before its fence is fragmentMark.
func yamlSnippets(file, text string) []docSnippet {
	lines := strings.Split(text, "\n")
	var out []docSnippet
	for i := 0; i < len(lines); i++ {
		if !fenceOpen.MatchString(lines[i]) {
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(lines[end], "```") {
			end++
		}
		prev := ""
		for k := i - 1; k >= 0; k-- {
			if s := strings.TrimSpace(lines[k]); s != "" {
				prev = s
				break
			}
		}
		out = append(out, docSnippet{file: file, line: i + 1, body: strings.Join(lines[i+1:end], "\n") + "\n",
			fragment: prev == fragmentMark})
		i = end
	}
	return out
}

// TestDocsConfigsAreValid runs `dsh config check` on every whole config in
// README.md and docs/, so a documented example cannot drift from what dsh
// accepts; fragments must at least be YAML.
func TestDocsConfigsAreValid(t *testing.T) {
	files, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{"../../README.md"}, files...)
	var whole int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimPrefix(f, "../../")
		for _, s := range yamlSnippets(name, string(b)) {
			var v any
			if err := yaml.Unmarshal([]byte(s.body), &v); err != nil {
				t.Errorf("%s:%d: the YAML block does not parse: %v", s.file, s.line, err)
				continue
			}
			if s.fragment {
				continue
			}
			whole++
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			if err := os.WriteFile(path, []byte(s.body), 0o644); err != nil {
				t.Fatal(err)
			}
			var out, errb bytes.Buffer
			if code := execute([]string{"config", "check", "--config", path}, strings.NewReader(""), &out, &errb); code != 0 {
				t.Errorf("%s:%d: `dsh config check` exits %d on this config (mark a partial config with %s on the line before its fence):\n%s",
					s.file, s.line, code, fragmentMark, errb.String())
			}
		}
	}
	if whole == 0 {
		t.Fatal("no whole config found in the docs: the snippet scan is broken")
	}
}

func TestYAMLSnippetsFindsBlocksAndFragments(t *testing.T) {
	text := "intro\n```yaml\na: 1\n```\n\n" + fragmentMark + "\n\n```yml\n- b\n```\n```go\nx\n```\n"
	got := yamlSnippets("x.md", text)
	if len(got) != 2 || got[0].line != 2 || got[0].body != "a: 1\n" || got[0].fragment ||
		got[1].line != 8 || got[1].body != "- b\n" || !got[1].fragment {
		t.Fatalf("snippets: %+v", got)
	}
}
