package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// usageConfig writes a config whose scripted model reports usage over two
// steps (a tool call, then the answer); extra goes under plugins, agent
// under the agent, pricing at the root.
func usageConfig(t *testing.T, dir, extra, agent, pricing string) string {
	t.Helper()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "Let me look."
          tool_calls:
            - name: clock
              arguments: '{"timezone": "UTC"}'
          usage: {input_tokens: 1200, cache_hit_tokens: 1000, cache_miss_tokens: 200, output_tokens: 30, reasoning_tokens: 10}
        - text: "Done."
          usage: {input_tokens: 1300, cache_hit_tokens: 1200, cache_miss_tokens: 100, output_tokens: 8}
  - use: tools.clock
`+extra+`agents:
  - id: main
    provider: scripted
`+agent+`log:
  level: warn
`+pricing), 0o644)
	return cfg
}

const demoPricing = `pricing:
  models:
    demo: {input: 0.27, cache_hit: 0.07, output: 1.10}
`

// One turn: (200×0.27 + 1000×0.07 + 30×1.10 + 100×0.27 + 1200×0.07 + 8×1.10) / 1e6.
const turnCost = 0.0002768

func TestRunReportsUsageAndCost(t *testing.T) {
	cfg := usageConfig(t, t.TempDir(), "", "    model: demo\n", demoPricing)
	o := runDsh(t, "", "run", "--config", cfg, "-p", "hi")
	want := "usage: turn 1 (2 steps): 2,500 in (2,200 cache hit, 300 miss) · 38 out (10 reasoning) · $0.0003\n" +
		"usage: session (2 steps): 2,500 in (2,200 cache hit, 300 miss) · 38 out (10 reasoning) · $0.0003\n"
	if o.code != 0 || !strings.HasSuffix(o.stderr, want) || strings.Contains(o.stdout, "usage") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}

	o = runDsh(t, "", "run", "--config", cfg, "-p", "hi", "--json")
	lines := strings.Split(strings.TrimSpace(o.stdout), "\n")
	var raw map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &raw); err != nil {
		t.Fatalf("%v: %s", err, o.stdout)
	}
	sess, _ := raw["session"].(map[string]any)
	step, _ := raw["step"].(map[string]any)
	if raw["type"] != "session/usage" || raw["currency"] != "USD" || sess["steps"] != 2.0 || sess["input_tokens"] != 2500.0 ||
		sess["cache_hit_tokens"] != 2200.0 || sess["cost"] != turnCost || step["model"] != "demo" || raw["session_id"] == "" {
		t.Fatalf("last line: %s", lines[len(lines)-1])
	}
	if strings.Contains(o.stderr, "usage:") {
		t.Fatalf("--json also wrote usage on stderr: %q", o.stderr)
	}
}

// A model that reports no tokens (the shipped offline config) leaves
// stderr without a usage line of zeros.
func TestNoReportedTokensNoUsageLine(t *testing.T) {
	o := runDsh(t, "", "run", "--config", "../../config.yaml", "-p", "hi")
	if o.code != 0 || strings.Contains(o.stderr, "usage:") {
		t.Fatalf("exit %d\nstderr %q", o.code, o.stderr)
	}
}

func TestUnknownModelShowsTokensWithoutCost(t *testing.T) {
	cfg := usageConfig(t, t.TempDir(), "", "    model: mystery\n", demoPricing)
	o := runDsh(t, "", "run", "--config", cfg, "-p", "hi")
	if o.code != 0 || !strings.Contains(o.stderr, "usage: session (2 steps): 2,500 in (2,200 cache hit, 300 miss) · 38 out (10 reasoning) · cost unknown (no price for mystery)\n") || strings.Contains(o.stderr, "$") {
		t.Fatalf("exit %d\nstderr %q", o.code, o.stderr)
	}
}

func TestBadPricingIsConfigInvalid(t *testing.T) {
	cfg := usageConfig(t, t.TempDir(), "", "", "pricing:\n  models:\n    demo: {input: 0.27, outptu: 1}\n")
	o := runDsh(t, "", "run", "--config", cfg, "-p", "hi")
	if o.code != 2 || !strings.Contains(o.stderr, "CONFIG_INVALID") || !strings.Contains(o.stderr, cfg+":20: pricing.models[demo].outptu: unknown key") {
		t.Fatalf("exit %d\nstderr %q", o.code, o.stderr)
	}
}

// TestResumedSessionKeepsItsUsage: the totals come from the log, so a
// second run of a persisted session counts the first one's steps, and
// dsh sessions show prints them per turn.
func TestResumedSessionKeepsItsUsage(t *testing.T) {
	dir := t.TempDir()
	store := "  - use: session.jsonl\n    config: {dir: " + filepath.Join(dir, "sessions") + "}\n"
	cfg := usageConfig(t, dir, store, "    model: demo\n    session: keep\n", demoPricing)
	for i, want := range []string{"usage: session (2 steps): 2,500 in", "usage: session (4 steps): 5,000 in (4,400 cache hit, 600 miss) · 76 out (20 reasoning) · $0.0006\n"} {
		if o := runDsh(t, "", "run", "--config", cfg, "-p", "hi"); o.code != 0 || !strings.Contains(o.stderr, want) {
			t.Fatalf("run %d: exit %d\nstderr %q", i+1, o.code, o.stderr)
		}
	}

	o := runDsh(t, "", "sessions", "list", "--config", cfg)
	if o.code != 0 || !strings.Contains(o.stdout, "keep  main   idle   2") {
		t.Fatalf("list: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	o = runDsh(t, "", "sessions", "show", "keep", "--config", cfg)
	for _, want := range []string{"session  keep\n", "turns    2\n",
		"  turn 1 (2 steps): 2,500 in (2,200 cache hit, 300 miss) · 38 out (10 reasoning) · $0.0003\n",
		"  turn 2 (2 steps): 2,500 in",
		"  session (4 steps): 5,000 in (4,400 cache hit, 600 miss) · 76 out (20 reasoning) · $0.0006\n"} {
		if o.code != 0 || !strings.Contains(o.stdout, want) {
			t.Fatalf("show: exit %d, want %q in\n%s%s", o.code, want, o.stdout, o.stderr)
		}
	}
	o = runDsh(t, "", "sessions", "show", "keep", "--json", "--config", cfg)
	var shown struct {
		ID    string `json:"id"`
		Turns int    `json:"turns"`
		Usage struct {
			Session struct {
				Steps int      `json:"steps"`
				Cost  *float64 `json:"cost"`
			} `json:"session"`
		} `json:"usage"`
		TurnUsage []struct {
			Turn  int `json:"turn"`
			Steps int `json:"steps"`
		} `json:"turn_usage"`
	}
	if err := json.Unmarshal([]byte(o.stdout), &shown); err != nil || shown.ID != "keep" || shown.Turns != 2 ||
		shown.Usage.Session.Steps != 4 || shown.Usage.Session.Cost == nil || *shown.Usage.Session.Cost != 2*turnCost || len(shown.TurnUsage) != 2 {
		t.Fatalf("show --json: %v\n%s", err, o.stdout)
	}

	if o := runDsh(t, "", "sessions", "show", "nope", "--config", cfg); o.code != exitNotFound || !strings.Contains(o.stderr, "SESSION_NOT_FOUND") {
		t.Fatalf("show nope: exit %d %q", o.code, o.stderr)
	}
	if o := runDsh(t, "", "sessions", "rm", "keep", "--config", cfg); o.code != 0 || o.stdout != "deleted keep\n" {
		t.Fatalf("rm: exit %d %q %q", o.code, o.stdout, o.stderr)
	}
	if o := runDsh(t, "", "sessions", "rm", "keep", "--config", cfg); o.code != exitNotFound {
		t.Fatalf("rm again: exit %d %q", o.code, o.stderr)
	}
	if o := runDsh(t, "", "sessions", "list", "--json", "--config", cfg); o.code != 0 || o.stdout != "[]\n" {
		t.Fatalf("list --json: exit %d %q %q", o.code, o.stdout, o.stderr)
	}
}

func TestSessionsWithoutPersistenceIsAUsageError(t *testing.T) {
	cfg := usageConfig(t, t.TempDir(), "", "", "")
	o := runDsh(t, "", "sessions", "list", "--config", cfg)
	if o.code != exitUsage || !strings.Contains(o.stderr, "SESSION_NO_PERSISTENCE") {
		t.Fatalf("exit %d %q", o.code, o.stderr)
	}
}

func TestInteractiveUsage(t *testing.T) {
	cfg := usageConfig(t, t.TempDir(), "", "    model: demo\n", demoPricing)
	tty, cmd, scr, pos := startInteractive(t, cfg)
	io.WriteString(tty, "/usage\r")
	pos = scr.waitFor(t, pos, "no model calls yet in this session")
	io.WriteString(tty, "hi\r")
	pos = scr.waitFor(t, pos, "Done.")
	pos = scr.waitFor(t, pos, "> ")
	io.WriteString(tty, "/usage\r")
	pos = scr.waitFor(t, pos, "usage: last step (turn 1, step 2): 1,300 in (1,200 cache hit, 100 miss) · 8 out · $0.0001")
	pos = scr.waitFor(t, pos, "usage: turn 1 (2 steps): 2,500 in")
	pos = scr.waitFor(t, pos, "usage: session (2 steps): 2,500 in (2,200 cache hit, 300 miss) · 38 out (10 reasoning) · $0.0003")
	io.WriteString(tty, "\x04")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("did not exit on Ctrl-D:\n%s", scr.String())
	}
	// Leaving shows the session's usage.
	scr.waitFor(t, pos, "usage: session (2 steps)")
}

// TestSessionsRmRefusesAnOpenSession: a session another dsh holds is not
// deleted (exit 1, SESSION_LOCKED), and show still reads it.
func TestSessionsRmRefusesAnOpenSession(t *testing.T) {
	dir := t.TempDir()
	store := "  - use: session.jsonl\n    config: {dir: " + filepath.Join(dir, "sessions") + "}\n"
	cfg := usageConfig(t, dir, store, "    model: demo\n    session: held\n", demoPricing)
	tty, cmd, scr, pos := startInteractive(t, cfg)
	io.WriteString(tty, "hi\r")
	pos = scr.waitFor(t, pos, "Done.")
	scr.waitFor(t, pos, "> ")

	if o := runDsh(t, "", "sessions", "rm", "held", "--config", cfg); o.code != exitError || !strings.Contains(o.stderr, "SESSION_LOCKED") {
		t.Fatalf("rm of a held session: exit %d %q", o.code, o.stderr)
	}
	if o := runDsh(t, "", "sessions", "show", "held", "--config", cfg); o.code != 0 || !strings.Contains(o.stdout, "state    open") || !strings.Contains(o.stdout, "session (2 steps)") {
		t.Fatalf("show of a held session: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	io.WriteString(tty, "\x04")
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		t.Fatal("did not exit on Ctrl-D")
	}
}

// A subagent's session shows its parent's in the listing; without one
// the column is left out.
func TestSessionsListShowsASubagentsParent(t *testing.T) {
	var b strings.Builder
	list := []session.Summary{{ID: "main", Agent: "main", State: session.StateIdle, Turns: 2},
		{ID: "main.sub-call_1-0a1b2c3d", Agent: "helper", State: session.StateIdle, Turns: 1, Parent: "main"}}
	if err := writeList(&b, list, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if !strings.Contains(lines[0], "PARENT") || !strings.HasPrefix(strings.Fields(lines[2])[1], "main") || strings.Fields(lines[1])[1] != "-" {
		t.Fatalf("listing:\n%s", b.String())
	}
	b.Reset()
	if err := writeList(&b, list[:1], false); err != nil || strings.Contains(b.String(), "PARENT") {
		t.Fatalf("no subagent, no column: %v\n%s", err, b.String())
	}
}

// A compaction's summary request belongs to its turn in dsh sessions show,
// as it does in the session's total.
func TestTurnUsageCountsACompaction(t *testing.T) {
	u := llm.Usage{InputTokens: 100, OutputTokens: 10}
	events := []session.Event{
		{Type: session.AssistantMessage, Turn: 1, Step: 1, Usage: &u},
		{Type: session.Compacted, Turn: 2, Step: 1, Usage: &u},
		{Type: session.AssistantMessage, Turn: 2, Step: 1, Usage: &u},
	}
	got := turnUsage(&config.Config{}, config.AgentConfig{}, events)
	if len(got) != 2 || got[1].Turn != 2 || got[1].Steps != 2 || got[1].InputTokens != 200 {
		t.Fatalf("turns %+v", got)
	}
}

func TestDescendantsAreListedDeepestFirst(t *testing.T) {
	list := []session.Summary{{ID: "top"}, {ID: "a", Parent: "top"}, {ID: "a1", Parent: "a"}, {ID: "b", Parent: "top"}, {ID: "other"}}
	got := strings.Join(descendants(list, "top"), " ")
	if got != "a1 a b" {
		t.Fatalf("descendants of top: %q", got)
	}
	if d := descendants(list, "other"); len(d) != 0 {
		t.Fatalf("descendants of other: %v", d)
	}
}

// dsh sessions rm of a parent takes its subagents' sessions with it.
func TestSessionsRmTakesTheSubagentsSessions(t *testing.T) {
	dir := t.TempDir()
	store := "  - use: session.jsonl\n    config: {dir: " + filepath.Join(dir, "sessions") + "}\n"
	child := "top.sub-call_1-0a1b2c3d"
	for _, id := range []string{"top", child, "other"} {
		cfg := usageConfig(t, dir, store, "    session: "+id+"\n", "")
		if o := runDsh(t, "", "run", "--config", cfg, "-p", "hi"); o.code != 0 {
			t.Fatalf("run %s: exit %d %s", id, o.code, o.stderr)
		}
	}
	cfg := usageConfig(t, dir, store, "", "")
	if o := runDsh(t, "", "sessions", "rm", "top", "--config", cfg); o.code != 0 || o.stdout != "deleted "+child+"\ndeleted top\n" {
		t.Fatalf("rm: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	o := runDsh(t, "", "sessions", "list", "--config", cfg)
	if o.code != 0 || strings.Contains(o.stdout, "top") || !strings.Contains(o.stdout, "other") {
		t.Fatalf("list after rm: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
}
