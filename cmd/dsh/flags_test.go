package main

import (
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
