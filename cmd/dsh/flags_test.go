package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestApprovalFlags(t *testing.T) {
	cfg := writeConfig(t, "        - text: done\n", "")
	o := runDsh(t, "", "run", "--config", cfg, "--allow", "bash:rm", "-p", "x")
	if o.code != 2 || !strings.Contains(o.stderr, `--allow "bash:rm": give a tool name`) {
		t.Fatalf("bad --allow: %d %q", o.code, o.stderr)
	}
	for _, flag := range []string{"--yolo", "--dangerously-skip-approvals"} {
		o = runDsh(t, "", "run", "--config", cfg, flag, "-p", "x")
		if o.code != 0 || o.stdout != "done\n" || !strings.Contains(o.stderr, "dsh: warning: --yolo: every tool call a policy asks about runs without asking; deny rules still hold") {
			t.Fatalf("%s: %d %q %q", flag, o.code, o.stdout, o.stderr)
		}
	}
	// A typo would allow nothing: the operator hears of it.
	o = runDsh(t, "", "run", "--config", cfg, "--allow", "clock", "--allow", "bsh", "-p", "x")
	if o.code != 0 || strings.Contains(o.stderr, "no tool \"clock\"") || !strings.Contains(o.stderr, `--allow bsh: agent main has no tool "bsh" (its tools: clock)`) {
		t.Fatalf("--allow of a missing tool: %d %q", o.code, o.stderr)
	}
}

// TestYoloDoesNotAnswerAHooksAsk: --yolo answers the asks of dsh's
// policies, not a PreToolUse hook's "ask" (a real hook script): in -p
// that call is refused, with a reason that says so.
func TestYoloDoesNotAnswerAHooksAsk(t *testing.T) {
	dir := t.TempDir()
	hook := filepath.Join(dir, "ask.sh")
	if err := os.WriteFile(hook, []byte("#!/bin/sh\ncat >/dev/null\necho '{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"ask\",\"permissionDecisionReason\":\"check the time yourself\"}}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	extra := "  - use: hooks.command\n    config:\n      hooks:\n        PreToolUse:\n          - matcher: clock\n            hooks: [{type: command, command: " + hook + "}]\n"
	cfg := writeConfig(t, "        - text: \"checking \"\n          tool_calls: [{name: clock}]\n        - text: done\n", extra)
	o := runDsh(t, "", "run", "--config", cfg, "--yolo", "-p", "what time is it")
	if o.code != 0 || strings.Contains(o.stderr, "allowed by --yolo") ||
		!strings.Contains(o.stderr, "a PreToolUse hook (hooks.command:PreToolUse) asks a person about it") ||
		!strings.Contains(o.stderr, "--yolo and --allow do not answer a hook's ask") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
}
