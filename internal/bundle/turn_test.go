package bundle_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/hosttest"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/hashicorp/go-hclog"
)

// kit writes the bundle echo-kit under dir as Claude Code's plugin
// reference lays one out — manifest, hooks/hooks.json calling a script
// through ${CLAUDE_PLUGIN_ROOT}, .mcp.json starting a server shipped in the
// bundle — and returns its root. The hook records what it was given in
// out and blocks a call whose input says "forbidden", as a Claude Code
// PreToolUse guard does (exit 2, the reason on stderr); its matcher names
// the tool as Claude Code names a plugin's MCP tool.
func kit(t *testing.T, dir, out string) string {
	t.Helper()
	root := filepath.Join(dir, "echo-kit")
	files := map[string]string{
		// The command and the skill as the Claude Code and Agent Skills
		// documentation write them.
		"commands/review.md": `---
description: Review code for a topic
argument-hint: [topic]
---

Review the code for $ARGUMENTS and list the problems you find.
`,
		"skills/house-style/SKILL.md": `---
name: house-style
description: The house coding style. Use when writing or reviewing code in this repository.
---

# House style

Indent with tabs. Name errors after what failed.
`,
		".claude-plugin/plugin.json": `{
  "name": "echo-kit",
  "version": "0.1.0",
  "description": "An echo server and a guard for it",
  "author": {"name": "dsh tests"}
}`,
		".mcp.json": `{
  "mcpServers": {
    "echo": {
      "command": "${CLAUDE_PLUGIN_ROOT}/servers/echo-server",
      "env": {"DSH_BUNDLE_TEST_SERVER": "1", "GREETING": "${GREETING:-hello}", "CALLS": "${BUNDLE_OUT}/calls.log"}
    }
  }
}`,
		"hooks/hooks.json": `{
  "description": "guards the echo server",
  "hooks": {
    "PreToolUse": [
      {"matcher": "mcp__plugin_echo-kit_echo__say", "hooks": [{"type": "command", "command": "${CLAUDE_PLUGIN_ROOT}/scripts/guard.sh", "timeout": 10}]}
    ]
  }
}`,
		"scripts/guard.sh": fmt.Sprintf(`#!/bin/sh
input=$(cat)
printf '%%s\n' "$input" >> %[1]s/pre.log
printf '%%s\n' "$CLAUDE_PLUGIN_ROOT" > %[1]s/root.txt
case "$input" in
  *forbidden*) echo "no forbidden words" >&2; exit 2 ;;
esac
exit 0
`, out),
	}
	for path, content := range files {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "servers"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The server the bundle ships: this test binary, which serves MCP
	// when DSH_BUNDLE_TEST_SERVER is set.
	if err := os.Symlink(os.Args[0], filepath.Join(root, "servers/echo-server")); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(root)
	return real
}

// TestABundleWorksThroughARealTurn: a bundle in a preset mounts its MCP
// server and its hooks for that preset's agent only; in a whole turn the
// model calls the server's tool, the bundle's PreToolUse hook sees the call
// (with ${CLAUDE_PLUGIN_ROOT} expanded and set), lets one through and
// blocks the other before it reaches the server.
func TestABundleWorksThroughARealTurn(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	root := kit(t, dir, out)
	yaml := `
plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "first"
          tool_calls:
            - name: echo__say
              arguments: '{"text": "world"}'
        - text: "second"
          tool_calls:
            - name: echo__say
              arguments: '{"text": "forbidden"}'
        - text: "done"
presets:
  kit:
    - bundle: ./echo-kit
agents:
  - id: a
    provider: scripted
    preset: kit
  - id: b
    provider: scripted
`
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: file, Dir: dir, Environ: []string{"BUNDLE_OUT=" + out}})
	if err != nil {
		t.Fatal(err)
	}
	tree := host.Describe(cfg)
	for _, want := range []string{
		`echo-kit/mcp/echo (use tools.mcp) (from bundle "echo-kit")`,
		`echo-kit/hooks (use hooks.command) (from bundle "echo-kit")`,
		"presets.kit[0]: bundle \"echo-kit\" " + root,
		"mounts: echo-kit/protect, echo-kit/skills, echo-kit/commands, echo-kit/hooks, echo-kit/mcp/echo",
		"reads from dsh's environment: BUNDLE_OUT",
	} {
		if !strings.Contains(tree, want) {
			t.Errorf("config check's tree lacks %q:\n%s", want, tree)
		}
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	svc, err := tools.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := h.Agent("a")
	b, _ := h.Agent("b")
	if svc.Lookup(a.Context(), "echo__say") == nil {
		t.Fatal("agent a lacks the bundle's tool")
	}
	if svc.Lookup(b.Context(), "echo__say") != nil {
		t.Fatal("the bundle's tool reached an agent without the preset")
	}
	if err := a.Followup(llm.Message{Role: llm.RoleUser, Content: "go"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, e := range a.Session().Events(1) {
		if e.Type == session.ToolResult && e.Message != nil {
			results = append(results, e.Message.Content)
		}
	}
	if len(results) != 2 {
		t.Fatalf("tool results %q", results)
	}
	if want := "hello: world (root " + root + ")"; results[0] != want {
		t.Errorf("first result %q; want %q", results[0], want)
	}
	if !strings.Contains(results[1], "no forbidden words") {
		t.Errorf("second result %q; want the hook's reason", results[1])
	}
	calls, _ := os.ReadFile(filepath.Join(out, "calls.log"))
	if string(calls) != "world\n" {
		t.Errorf("the server was called with %q; the blocked call must not reach it", calls)
	}
	pre, _ := os.ReadFile(filepath.Join(out, "pre.log"))
	if n := strings.Count(string(pre), `"tool_name"`); n != 2 {
		t.Errorf("the hook ran %d times; want 2:\n%s", n, pre)
	}
	seen, _ := os.ReadFile(filepath.Join(out, "root.txt"))
	if strings.TrimSpace(string(seen)) != root {
		t.Errorf("the hook saw CLAUDE_PLUGIN_ROOT=%q; want %q", seen, root)
	}
}

// TestABundlesCommandAndSkillWorkThroughAdmission: beside the user's own
// skills and commands entries, a person's "/review
// ..." reaches the model expanded from the bundle's command file (the
// expansion happens at admission, so it is delivered through the agent
// controller like any entry point's prompt), the bundle's skill is listed
// in the system prompt, and the skill tool hands its body to the model.
func TestABundlesCommandAndSkillWorkThroughAdmission(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	kit(t, dir, out)
	yaml := `
plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "loading the style"
          tool_calls:
            - name: skill
              arguments: '{"name": "house-style"}'
        - text: "reviewed"
  - use: prompt.skills        # the user's own skills and commands beside the bundle's
  - use: prompt.commands
  - bundle: ./echo-kit
agents:
  - id: a
    provider: scripted
`
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: file, Dir: dir, Environ: []string{"BUNDLE_OUT=" + out}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	var mu sync.Mutex
	var reqs []llm.Request
	agentloop.EventRequest.On(h.Root(), func(ctx stdctx.Context, ev agentloop.RequestEvent, next waterfall.Next[agentloop.RequestEvent, llm.Request]) (llm.Request, error) {
		mu.Lock()
		reqs = append(reqs, ev.Request)
		mu.Unlock()
		return next.Call(ctx, ev)
	})
	ctl, err := agentcontroller.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	a, _ := h.Agent("a")
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	if _, err := ctl.Deliver(ctx, a, agentcontroller.Request{Mode: agentcontroller.Followup, Source: agentcontroller.Source{Kind: agentcontroller.SourceUser}, Content: "/review error handling"}); err != nil {
		t.Fatal(err)
	}
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reqs) != 2 {
		t.Fatalf("%d model requests; want 2", len(reqs))
	}
	first := reqs[0]
	if !strings.Contains(first.System, "house-style") || !strings.Contains(first.System, "The house coding style.") {
		t.Errorf("the bundle's skill is not listed in the system prompt:\n%s", first.System)
	}
	user, _ := first.History.Last()
	if !strings.Contains(user.Content, "Review the code for error handling and list the problems you find.") {
		t.Errorf("the command was not expanded from the bundle's file: %q", user.Content)
	}
	result, _ := reqs[1].History.Last()
	if result.IsError || !strings.Contains(result.Content, "Indent with tabs.") {
		t.Errorf("the skill tool's result: %+v", result)
	}
}

// TestAReloadPicksUpABundlesChange: an edit to a bundle's files changes
// its generated entry, so a reload restarts that entry alone; an edit that
// breaks the bundle fails the new config's load, and the running host
// keeps the old one whole.
func TestAReloadPicksUpABundlesChange(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	root := kit(t, dir, out)
	yaml := `
plugins:
  - use: llm.scripted
    config:
      replies:
        - text: "calling"
          tool_calls:
            - name: echo__say
              arguments: '{"text": "world"}'
        - text: "done"
  - bundle: ./echo-kit
agents:
  - id: a
    provider: scripted
`
	file := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := config.LoadOptions{Path: file, Dir: dir, Environ: []string{"BUNDLE_OUT=" + out}}
	cfg, err := config.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())

	mcpFile := filepath.Join(root, ".mcp.json")
	orig, _ := os.ReadFile(mcpFile)
	if err := os.WriteFile(mcpFile, []byte(strings.Replace(string(orig), "${GREETING:-hello}", "${GREETING:-good day}", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	next, err := config.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	if err := h.Reload(ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := sayOnce(t, ctx, h); got != "good day: world (root "+root+")" {
		t.Fatalf("after the reload the server answers %q", got)
	}

	if err := os.WriteFile(mcpFile, []byte(`{"mcpServers": {"echo": {"command": "${CLAUDE_PLUGIN_ROOT}/servers/echo-server", "env": {"T": "${UNSET_TOKEN}"}}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Load(opts); err == nil || !strings.Contains(err.Error(), "${UNSET_TOKEN} is not set") {
		t.Fatalf("a broken bundle loaded: %v", err)
	}
	if got := sayOnce(t, ctx, h); got != "good day: world (root "+root+")" {
		t.Fatalf("the running host changed after a failed load: %q", got)
	}
}

// sayOnce runs one turn of agent a (whose scripted model calls echo__say
// then answers) and returns the tool's result.
func sayOnce(t *testing.T, ctx stdctx.Context, h *host.Host) string {
	t.Helper()
	a, ok := h.Agent("a")
	if !ok {
		t.Fatal("no agent a")
	}
	n := len(a.Session().Events(1))
	if err := a.Followup(llm.Message{Role: llm.RoleUser, Content: "go"}); err != nil {
		t.Fatal(err)
	}
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
	result := ""
	for _, e := range a.Session().Events(1)[n:] {
		if e.Type == session.ToolResult && e.Message != nil {
			result = e.Message.Content
		}
	}
	return result
}
