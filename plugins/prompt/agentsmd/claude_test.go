package agentsmd_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaudeCodeImportsAndSideFilesAreNamed: a CLAUDE.md that imports a
// file (@docs/style.md) gives Claude Code's model that file's text; dsh
// follows no imports, and used to pass the line on without a word. Each
// import that names a file is now named in a warning, with its line; one
// in a code block or span, an e-mail address or an @name that is no file
// is not. CLAUDE.local.md and .claude/CLAUDE.md, which Claude Code reads
// too, are named when the config reads CLAUDE.md.
func TestClaudeCodeImportsAndSideFilesAreNamed(t *testing.T) {
	ws := t.TempDir()
	if err := os.Mkdir(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(ws, "docs", "style.md"), "tabs, not spaces\n")
	write(t, filepath.Join(ws, "CLAUDE.md"), "# Rules\n\nSee @docs/style.md for the style.\nMail dev@example.com, ask @alice.\n\n```\n@docs/style.md\n```\n\nRun `@docs/style.md` never.\n")
	write(t, filepath.Join(ws, "CLAUDE.local.md"), "my own rules\n")
	cfg := defaults()
	cfg.Names = []string{"AGENTS.md", "CLAUDE.md"}
	e := newEnv(t, cfg)
	sys := e.turn(e.create("a", ws))
	if !strings.Contains(sys, "See @docs/style.md for the style.") {
		t.Fatalf("got %q", sys)
	}
	l := e.logged()
	for _, want := range []string{
		"agents-md: CLAUDE.md has Claude Code imports, which dsh does not follow: @docs/style.md (line 3);",
		"agents-md: " + filepath.Join(ws, "CLAUDE.local.md") + " is read by Claude Code beside CLAUDE.md, and not by dsh",
	} {
		if !strings.Contains(l, want) {
			t.Errorf("the log lacks %q:\n%s", want, l)
		}
	}
	for _, not := range []string{"line 7", "line 10", "example.com", "@alice"} {
		if strings.Contains(l, not) {
			t.Errorf("the log names %q:\n%s", not, l)
		}
	}

	// A config that reads AGENTS.md alone did not ask for Claude Code's
	// files: nothing is said of them.
	e2 := newEnv(t, defaults())
	e2.turn(e2.create("b", ws))
	if strings.Contains(e2.logged(), "CLAUDE.local.md") {
		t.Errorf("named for an AGENTS.md-only config:\n%s", e2.logged())
	}
}
