package execplugin_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

var (
	toolOnce sync.Once
	toolBin  string
	toolErr  error
)

// toolPlugin builds host/internal/tooltestplugin once per run.
func toolPlugin(t testing.TB) string {
	t.Helper()
	toolOnce.Do(func() {
		dir, err := os.MkdirTemp("", "dsh-toolplugin")
		if err != nil {
			toolErr = err
			return
		}
		toolBin = filepath.Join(dir, "tooltestplugin")
		if out, err := exec.Command("go", "build", "-o", toolBin, "../internal/tooltestplugin").CombinedOutput(); err != nil {
			toolErr = fmt.Errorf("go build tooltestplugin: %v\n%s", err, out)
		}
	})
	if toolErr != nil {
		t.Fatal(toolErr)
	}
	return toolBin
}

// toolConfig mounts the tool plugin as entry "tools" at the root, with
// pluginConfig, the entry's extra lines, and the scripted model's replies.
func toolConfig(bin, pluginConfig, extra, replies string) string {
	if replies == "" {
		replies = "        - text: done\n"
	}
	return fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
%s  - id: tools
    exec: %s
    config: %s
%sagents:
  - id: main
    provider: scripted
`, replies, bin, pluginConfig, extra)
}

// callTool takes one call through agentID's tools pipeline, as the agent
// loop would.
func callTool(t *testing.T, h *host.Host, agentID, name, args string) tools.Result {
	t.Helper()
	a, ok := h.Agent(agentID)
	if !ok {
		t.Fatalf("no agent %q", agentID)
	}
	svc, err := tools.Key.Get(a.Context())
	if err != nil {
		t.Fatal(err)
	}
	r, err := svc.Execute(stdctx.Background(), a.Context(), tools.Call{AgentID: agentID, ID: "t1", Name: name, Arguments: json.RawMessage(args)})
	if err != nil {
		t.Fatalf("a plugin's tool must never fail the turn: %v", err)
	}
	return r
}

// toolResults lists the tool results in agentID's session.
func toolResults(h *host.Host, agentID string) []string {
	a, _ := h.Agent(agentID)
	var out []string
	for _, e := range a.Session().Events(1) {
		if e.Type == "tool/result" {
			out = append(out, e.Message.Content)
		}
	}
	return out
}

// waitFor waits for file to hold want.
func waitFor(t *testing.T, file, want string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		if string(b) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %q, want %q", file, b, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestModelCallsAPluginTool(t *testing.T) {
	bin := toolPlugin(t)
	h, _ := startExec(t, toolConfig(bin, "{}", "", `        - tool_calls: [{name: echo, arguments: '{"text":"hi"}'}]
        - text: done
`))
	if _, err := send(h, stdctx.Background(), "main", "echo hi"); err != nil {
		t.Fatal(err)
	}
	if got := toolResults(h, "main"); len(got) != 1 || got[0] != "echo: hi" {
		t.Fatalf("the model was told %q", got)
	}
	a, _ := h.Agent("main")
	svc, _ := tools.Key.Get(a.Context())
	var names []string
	for _, s := range svc.Specs(a.Context()) {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "crash,echo,fail,hold,meet,never,parts,shout") {
		t.Fatalf("the model is offered %s", got)
	}
	if tool := svc.Lookup(a.Context(), "meet"); tool == nil || !tool.ParallelSafe || svc.Lookup(a.Context(), "echo").ParallelSafe {
		t.Fatal("parallel_safe must come from the declaration")
	}
}

func TestBadArgumentsAndUnapprovedCallsNeverReachThePlugin(t *testing.T) {
	bin := toolPlugin(t)
	calls := filepath.Join(t.TempDir(), "calls")
	h, _ := startExec(t, toolConfig(bin, fmt.Sprintf("{calls_file: %q}", calls), "", ""))
	if r := callTool(t, h, "main", "echo", `{"text": 5}`); !r.IsError || !strings.Contains(r.Content, `"text"`) {
		t.Fatalf("bad arguments: %+v", r)
	}
	if r := callTool(t, h, "main", "echo", `not json`); !r.IsError {
		t.Fatalf("arguments that are not JSON: %+v", r)
	}
	// approval: ask, and nobody attached to the agent: fail closed.
	if r := callTool(t, h, "main", "shout", `{}`); !r.IsError || !strings.Contains(r.Content, "nobody is attached") {
		t.Fatalf("ask with nobody attached: %+v", r)
	}
	if r := callTool(t, h, "main", "never", `{}`); !r.IsError || !strings.Contains(r.Content, "was denied") {
		t.Fatalf("approval: deny: %+v", r)
	}
	if b, _ := os.ReadFile(calls); len(b) != 0 {
		t.Fatalf("refused calls reached the plugin: %q", b)
	}
	a, _ := h.Agent("main")
	svc, _ := tools.Key.Get(a.Context())
	r, err := svc.Execute(stdctx.Background(), a.Context(), tools.Call{AgentID: "main", Name: "echo", Arguments: json.RawMessage(`{"text": "ok"}`), Workspace: "/ws", Unattended: true})
	if err != nil || r.IsError || r.Content != "echo: ok" {
		t.Fatalf("a good call: %+v %v", r, err)
	}
	if b, _ := os.ReadFile(calls); string(b) != "main echo {\"text\": \"ok\"} workspace=/ws unattended=true\n" {
		t.Fatalf("the plugin saw %q", b)
	}
}

func TestPluginToolResultsAndFailures(t *testing.T) {
	bin := toolPlugin(t)
	h, logs := startExec(t, toolConfig(bin, "{}", "    timeout: 300ms\n", ""))
	r := callTool(t, h, "main", "parts", "")
	if r.IsError || !strings.HasPrefix(r.Content, "first\nsecond\n") || !strings.Contains(r.Content, "image (image/png, 4 bytes)") {
		t.Fatalf("parts: %+v", r)
	}
	r = callTool(t, h, "main", "fail", "")
	if !r.IsError || !strings.Contains(r.Content, `"fail"`) || !strings.Contains(r.Content, `"tools"`) || !strings.Contains(r.Content, "the tool broke") {
		t.Fatalf("an error from the plugin: %+v", r)
	}
	if !strings.Contains(logs.String(), "TOOLTEST_BROKE") {
		t.Fatalf("the plugin's error was not logged:\n%s", logs.String())
	}
	r = callTool(t, h, "main", "hold", "")
	if !r.IsError || !strings.Contains(r.Content, "did not answer within 300ms") || !strings.Contains(r.Content, `"tools"`) {
		t.Fatalf("a call past the entry's timeout: %+v", r)
	}
}

func TestPresetToolsBelongToItsAgentOnly(t *testing.T) {
	bin := toolPlugin(t)
	h, _ := startExec(t, fmt.Sprintf(`plugins:
  - use: llm.scripted
presets:
  tooled:
    - exec: %s
agents:
  - id: a
    provider: scripted
    preset: tooled
  - id: b
    provider: scripted
`, bin))
	if r := callTool(t, h, "a", "echo", `{"text":"x"}`); r.IsError || r.Content != "echo: x" {
		t.Fatalf("a: %+v", r)
	}
	if r := callTool(t, h, "b", "echo", `{"text":"x"}`); !r.IsError || !strings.Contains(r.Content, "unknown tool") {
		t.Fatalf("b must not have a's tools: %+v", r)
	}
	b, _ := h.Agent("b")
	svc, _ := tools.Key.Get(b.Context())
	if svc.Lookup(b.Context(), "echo") != nil {
		t.Fatal("b is offered a's tool")
	}
}

func TestParallelSafeCallsOverlapInThePlugin(t *testing.T) {
	bin := toolPlugin(t)
	h, _ := startExec(t, toolConfig(bin, "{}", "", `        - tool_calls: [{name: meet, arguments: '{"n":2}'}, {name: meet, arguments: '{"n":2}'}]
        - text: done
`))
	if _, err := send(h, stdctx.Background(), "main", "meet"); err != nil {
		t.Fatal(err)
	}
	if got := toolResults(h, "main"); len(got) != 2 || got[0] != "met" || got[1] != "met" {
		t.Fatalf("the two calls did not run at the same time in the plugin: %q", got)
	}
}

func TestAbortReachesThePluginsTool(t *testing.T) {
	bin := toolPlugin(t)
	marker := filepath.Join(t.TempDir(), "marker")
	h, _ := startExec(t, toolConfig(bin, fmt.Sprintf("{marker: %q}", marker), "", `        - tool_calls: [{name: hold}]
        - text: done
`))
	a, _ := h.Agent("main")
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "hold"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, marker, "started")
	a.Abort()
	waitFor(t, marker, "cancelled")
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 15*time.Second)
	defer cancel()
	if err := a.WhenIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestBadToolDeclarationsFailTheStart(t *testing.T) {
	bin := toolPlugin(t)
	for bad, want := range map[string]string{
		"name":     `tool named "read file"; a tool's name must match ^[a-zA-Z0-9_-]{1,64}$`,
		"dup":      `declares the tool "echo" twice`,
		"approval": `its tool "maybe" declares approval "sometimes"; accepted: allow (or empty), ask, deny`,
		"schema":   `declares the tool "odd", which cannot be registered`,
		"json":     `the parameters of its tool "broken" are not JSON text`,
	} {
		t.Run(bad, func(t *testing.T) {
			cfg, err := config.Parse("exec.yaml", []byte(toolConfig(bin, "{}", fmt.Sprintf("    env: {TOOLTEST_BAD: %s}\n", bad), "")), config.LoadOptions{Environ: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
			if !errs.HasCode(err, execplugin.PluginProtocol) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), `"tools"`) {
				t.Fatalf("want PLUGIN_PROTOCOL saying %q, got %v", want, err)
			}
			if left := pluginPIDs(t, bin); len(left) > 0 {
				t.Fatalf("the refused plugin is still running: %v", left)
			}
		})
	}
}

// waitResult calls name until want accepts the result; every result on
// the way must be an error naming the plugin or pass want.
func waitResult(t *testing.T, h *host.Host, name, args string, want func(tools.Result) bool) tools.Result {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		r := callTool(t, h, "main", name, args)
		if want(r) {
			return r
		}
		if !r.IsError || !strings.Contains(r.Content, `"tools"`) {
			t.Fatalf("a call while the plugin is down must be an error result naming it: %+v", r)
		}
		if time.Now().After(deadline) {
			t.Fatalf("last result: %+v", r)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCrashMidCallAndCallsWhileRestarting: the call in flight gets an
// error naming the plugin; its tools stay while it restarts (this restart
// hangs, so the plugin stays down) and calls meanwhile are "unavailable".
func TestCrashMidCallAndCallsWhileRestarting(t *testing.T) {
	bin := toolPlugin(t)
	first := filepath.Join(t.TempDir(), "first")
	h, logs := startExec(t, toolConfig(bin, "{}", fmt.Sprintf("    env: {TOOLTEST_HANG_AFTER_FIRST: %q}\n    start_timeout: 60s\n", first), ""))
	r := callTool(t, h, "main", "crash", "")
	if !r.IsError || !strings.Contains(r.Content, `"tools"`) || !strings.Contains(r.Content, `"crash"`) || !strings.Contains(r.Content, "PLUGIN_CRASHED") || !strings.Contains(r.Content, "crashed or lost its connection during the call") && !strings.Contains(r.Content, "exited during the call") {
		t.Fatalf("the call in flight: %+v", r)
	}
	r = waitResult(t, h, "echo", `{"text":"x"}`, func(r tools.Result) bool { return strings.Contains(r.Content, "being restarted") })
	if !r.IsError || !strings.Contains(r.Content, `The tool "echo" is unavailable`) {
		t.Fatalf("while restarting: %+v", r)
	}
	a, _ := h.Agent("main")
	svc, _ := tools.Key.Get(a.Context())
	if svc.Lookup(a.Context(), "echo") == nil {
		t.Fatal("the tools must stay registered while the plugin restarts")
	}
	for deadline := time.Now().Add(15 * time.Second); !strings.Contains(logs.String(), "plugin exited; restarting"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no restart logged:\n%s", logs.String())
		}
	}
}

// TestCallsAfterThePluginWasGivenUp: with max_restarts: -1 the first crash
// is the last; calls then say the plugin was given up.
func TestCallsAfterThePluginWasGivenUp(t *testing.T) {
	bin := toolPlugin(t)
	h, _ := startExec(t, toolConfig(bin, "{}", "    max_restarts: -1\n    on_unavailable: skip\n", ""))
	callTool(t, h, "main", "crash", "")
	r := waitResult(t, h, "echo", `{"text":"x"}`, func(r tools.Result) bool { return strings.Contains(r.Content, "given up") })
	if !r.IsError || !strings.Contains(r.Content, "stays down") {
		t.Fatalf("after giving up: %+v", r)
	}
}

// TestARestartThatDeclaresOtherToolsKeepsTheFirst: the second process
// drops "parts" and adds "late"; the first declaration stays registered,
// with a warning, and a call of the dropped tool is an error result.
func TestARestartThatDeclaresOtherToolsKeepsTheFirst(t *testing.T) {
	bin := toolPlugin(t)
	gen := filepath.Join(t.TempDir(), "gen")
	h, logs := startExec(t, toolConfig(bin, "{}", fmt.Sprintf("    env: {TOOLTEST_GEN: %q}\n", gen), ""))
	callTool(t, h, "main", "crash", "")
	waitResult(t, h, "echo", `{"text":"back"}`, func(r tools.Result) bool { return !r.IsError })
	if out := logs.String(); !strings.Contains(out, `plugin "tools"`) || !strings.Contains(out, "declared different tools after its restart (added late; removed parts)") {
		t.Fatalf("no warning about the new declaration:\n%s", out)
	}
	a, _ := h.Agent("main")
	svc, _ := tools.Key.Get(a.Context())
	if svc.Lookup(a.Context(), "late") != nil || svc.Lookup(a.Context(), "parts") == nil {
		t.Fatal("the first declaration must stay")
	}
	if r := callTool(t, h, "main", "parts", ""); !r.IsError || !strings.Contains(r.Content, `declares no tool "parts"`) {
		t.Fatalf("a call of the dropped tool: %+v", r)
	}
}

// TestDisposeRemovesThePluginsToolsAndLeaksNothing mounts the entry on a
// bare tree: disposing its fiber removes its tools and its process, and
// leaves no goroutine behind.
func TestDisposeRemovesThePluginsToolsAndLeaksNothing(t *testing.T) {
	bin := toolPlugin(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg, err := config.Parse("exec.yaml", []byte(toolConfig(bin, "{}", "", "")), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	tf, err := root.Plugin(tools.Plugin, nil)
	if err == nil {
		err = tf.Await(stdctx.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	p := execplugin.New(cfg.Plugins[1])
	f, err := root.Plugin(p, nil)
	if err == nil {
		err = f.Await(stdctx.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := tools.Key.Get(root)
	if svc.Lookup(root, "echo") == nil {
		t.Fatal("the plugin's tool was not registered at the root")
	}
	r, err := svc.Execute(stdctx.Background(), root, tools.Call{Name: "echo", Arguments: json.RawMessage(`{"text":"x"}`)})
	if err != nil || r.Content != "echo: x" {
		t.Fatalf("%+v %v", r, err)
	}
	pid := execplugin.PID(p)
	if err := f.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if svc.Lookup(root, "echo") != nil {
		t.Fatal("dispose left the plugin's tool registered")
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("dispose left the plugin process %d running", pid)
	}
	if err := root.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestTwoEntriesDeclaringOneToolConflict: the second entry's start fails,
// naming the tool and what to do.
func TestTwoEntriesDeclaringOneToolConflict(t *testing.T) {
	bin := toolPlugin(t)
	yaml := toolConfig(bin, "{}", fmt.Sprintf("  - id: again\n    exec: %s\n", bin), "")
	cfg, err := config.Parse("exec.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if !errs.HasCode(err, errs.ServiceConflict) || !strings.Contains(err.Error(), `plugin "again"`) || !strings.Contains(err.Error(), "already registered in this scope; remove one") {
		t.Fatalf("got %v", err)
	}
}

// TestExampleToolPlugin drives examples/plugin-tool: text, a file in the
// workspace, and a path outside it.
func TestExampleToolPlugin(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "word-count")
	if out, err := exec.Command("go", "build", "-o", exe, "../../examples/plugin-tool").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "notes.txt"), []byte("one two\nthree\n"), 0o644)
	h, _ := startExec(t, fmt.Sprintf(`plugins:
  - use: llm.scripted
  - id: word-count
    exec: %s
agents:
  - id: main
    provider: scripted
    workspace: %s
`, exe, ws))
	a, _ := h.Agent("main")
	svc, _ := tools.Key.Get(a.Context())
	run := func(args string) tools.Result {
		r, err := svc.Execute(stdctx.Background(), a.Context(), tools.Call{AgentID: "main", Name: "word_count", Arguments: json.RawMessage(args), Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := run(`{"text":"a b c"}`); r.IsError || r.Content != "the text: 0 lines, 3 words, 5 bytes" {
		t.Fatalf("text: %+v", r)
	}
	if r := run(`{"path":"notes.txt"}`); r.IsError || r.Content != "notes.txt: 2 lines, 3 words, 14 bytes" {
		t.Fatalf("path: %+v", r)
	}
	if r := run(`{"path":"../etc/passwd"}`); !r.IsError || !strings.Contains(r.Content, "outside the workspace") {
		t.Fatalf("escape: %+v", r)
	}
	if r := run(`{"size": 3}`); !r.IsError || !strings.Contains(r.Content, "size") {
		t.Fatalf("an unknown argument must be refused by the schema: %+v", r)
	}
}

// TestAPluginOffTheProtocol: a binary that declares tools but does not
// implement ExecuteTool, or answers with nothing, gets an error result
// that names it, never a failed turn.
func TestAPluginOffTheProtocol(t *testing.T) {
	bin := toolPlugin(t)
	for mode, want := range map[string]string{
		"unimplemented": `declares the tool "echo" but does not implement ExecuteTool`,
		"empty":         `answered a call of its tool "echo" with neither a result nor an error`,
	} {
		t.Run(mode, func(t *testing.T) {
			h, _ := startExec(t, toolConfig(bin, "{}", fmt.Sprintf("    env: {TOOLTEST_RAW: %s}\n", mode), ""))
			r := callTool(t, h, "main", "echo", `{"text":"x"}`)
			if !r.IsError || !strings.Contains(r.Content, "PLUGIN_PROTOCOL") || !strings.Contains(r.Content, want) || !strings.Contains(r.Content, `"tools"`) {
				t.Fatalf("%+v", r)
			}
		})
	}
}
