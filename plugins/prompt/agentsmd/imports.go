package agentsmd

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// importRef finds an @path at the start of a word: Claude Code's import
// syntax in CLAUDE.md, which puts the named file's text in the context
// with the file's.
var importRef = lazyregexp.New(`(?:^|\s)@([^\s@]+)`)

// inlineCode finds `code` spans, where Claude Code does not import.
var inlineCode = lazyregexp.New("`[^`]*`")

// imports names the Claude Code imports (@path naming a file that exists)
// in f, outside code blocks and spans: dsh does not follow them, so the
// model would read "@docs/style.md" where Claude Code's reads the file.
func (l *layout) imports(f file, home string) []string {
	dir := filepath.Dir(filepath.Join(l.top, filepath.FromSlash(f.label)))
	var out []string
	fenced := false
	for i, line := range strings.Split(f.text, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range importRef.Regexp().FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
			p := strings.TrimRight(m[1], ".,;:)")
			switch {
			case strings.HasPrefix(p, "~/") && home != "":
				p = filepath.Join(home, p[2:])
			case !filepath.IsAbs(p):
				p = filepath.Join(dir, p)
			}
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
				out = append(out, fmt.Sprintf("@%s (line %d)", m[1], i+1))
			}
		}
	}
	return out
}

// claudeFiles names the files Claude Code reads beside a CLAUDE.md that
// the names do not take: CLAUDE.local.md and .claude/CLAUDE.md in each
// directory. Only when names has CLAUDE.md: a config that reads
// AGENTS.md alone did not ask for Claude Code's files.
func (l *layout) claudeFiles(names []string) []string {
	if !slices.Contains(names, "CLAUDE.md") {
		return nil
	}
	var out []string
	seen := map[int]bool{}
	for _, c := range l.cands {
		if seen[c.dir] {
			continue
		}
		seen[c.dir] = true
		dir := filepath.Dir(c.abs)
		for _, n := range []string{"CLAUDE.local.md", filepath.Join(".claude", "CLAUDE.md")} {
			if slices.Contains(names, filepath.ToSlash(n)) {
				continue
			}
			if fi, err := os.Stat(filepath.Join(dir, n)); err == nil && fi.Mode().IsRegular() {
				out = append(out, filepath.Join(dir, n))
			}
		}
	}
	return out
}
