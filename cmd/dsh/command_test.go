package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// commandsConfig writes a workspace holding the review-pr example of
// Claude Code's slash command page and a config mounting prompt.commands
// for an echoing scripted model working there.
func commandsConfig(t *testing.T) string {
	t.Helper()
	ws := t.TempDir()
	dir := filepath.Join(ws, ".claude", "commands")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "review-pr.md"), []byte("---\nargument-hint: [pr-number] [priority] [assignee]\ndescription: Review pull request\n---\n\nReview PR #$1 with priority $2 and assign to $3.\nFocus on security, performance, and code style.\n"), 0o644)
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte("plugins:\n  - use: llm.scripted\n  - use: prompt.commands\nagents:\n  - id: main\n    provider: scripted\n    workspace: "+ws+"\nlog:\n  level: warn\n"), 0o644)
	return cfg
}

// TestRunCommandFlag: --command NAME ARGS is the prompt "/NAME ARGS",
// expanded by the agent; an unknown name is refused with the list (exit
// 3), and arguments without --command are a usage error.
func TestRunCommandFlag(t *testing.T) {
	cfg := commandsConfig(t)
	home := t.TempDir()
	o := runDshEnv(t, []string{"HOME=" + home}, "run", "--config", cfg, "--command", "review-pr", "456", "high", "alice")
	if o.code != 0 || !strings.Contains(o.stdout, "Review PR #456 with priority high and assign to alice.") {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", o.code, o.stdout, o.stderr)
	}
	o = runDshEnv(t, []string{"HOME=" + home}, "run", "--config", cfg, "--command", "deploy")
	if o.code != 3 || !strings.Contains(o.stderr, "/deploy is not a command; the commands are /review-pr") {
		t.Fatalf("unknown: exit %d\nstderr %s", o.code, o.stderr)
	}
	o = runDshEnv(t, []string{"HOME=" + home}, "run", "--config", cfg, "stray")
	if o.code != 2 || !strings.Contains(o.stderr, "--command NAME stray") {
		t.Fatalf("stray argument: exit %d\nstderr %s", o.code, o.stderr)
	}
	o = runDshEnv(t, []string{"HOME=" + home}, "run", "--config", cfg, "--command", "review-pr", "-p", "hi")
	if o.code != 2 || !strings.Contains(o.stderr, "--command and -p") {
		t.Fatalf("both: exit %d\nstderr %s", o.code, o.stderr)
	}
}

// TestInteractivePromptCommands: in the interactive session a line
// "/review-pr …" is sent to the agent (not "unknown command"), /help lists
// it, and the CLI's own commands keep their meaning.
func TestInteractivePromptCommands(t *testing.T) {
	cfg := commandsConfig(t)
	t.Setenv("HOME", t.TempDir())
	tty, cmd, scr, pos := startInteractive(t, cfg)
	io.WriteString(tty, "/help\r")
	pos = scr.waitFor(t, pos, "/review-pr [pr-number] [priority] [assignee] Review pull request")
	pos = scr.waitFor(t, pos, "> ")
	io.WriteString(tty, "/review-pr 456 high alice\r")
	pos = scr.waitFor(t, pos, "Review PR #456 with priority high and assign to alice.")
	pos = scr.waitFor(t, pos, "> ")
	io.WriteString(tty, "/nope\r")
	scr.waitFor(t, pos, "unknown command /nope; /help lists them")
	leaveWithCtrlD(t, tty, cmd, scr)
}
