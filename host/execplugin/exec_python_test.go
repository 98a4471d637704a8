package execplugin_test

import (
	stdctx "context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/hashicorp/go-hclog"
)

// requirePython skips without Debian's python3-grpcio, python3-protobuf and
// python3-cryptography; .ci/run installs them, so in CI a missing module
// fails the test instead of skipping it.
func requirePython(t testing.TB) {
	t.Helper()
	check := exec.Command("/usr/bin/python3", "-c", "import grpc, google.protobuf, cryptography")
	if out, err := check.CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have python3-grpcio, python3-protobuf and python3-cryptography: %v\n%s", err, out)
		}
		t.Skipf("python3 with grpc, protobuf and cryptography is not installed (apt-get install python3-grpcio python3-protobuf python3-cryptography): %s", out)
	}
}

// pythonEntry is the config entry of a Python plugin on the SDK in
// sdk/python, found through PYTHONPATH as the examples' READMEs show.
func pythonEntry(t testing.TB, id, script, config string) string {
	t.Helper()
	sdkDir, _ := filepath.Abs("../../sdk/python")
	script, _ = filepath.Abs(script)
	return fmt.Sprintf(`  - id: %s
    exec: /usr/bin/python3
    args: [%q]
    env: {PYTHONPATH: %q}
    config: %s
`, id, script, sdkDir, config)
}

// TestPythonPlugin runs examples/python-admission/plugin.py end to end:
// it admits, refuses by code and reason, and its log lines reach the
// host's log under the entry's id.
func TestPythonPlugin(t *testing.T) {
	requirePython(t)
	yaml := "plugins:\n  - use: llm.scripted\n" +
		pythonEntry(t, "no-secrets", "../../examples/python-admission/plugin.py", `{word: password}`) +
		"agents:\n  - id: main\n    provider: scripted\n"
	h, logs := startExec(t, yaml)
	if _, err := send(h, stdctx.Background(), "main", "hello from python"); err != nil {
		t.Fatalf("admit: %v\n%s", err, logs.String())
	}
	_, err := send(h, stdctx.Background(), "main", "the password is 42")
	ref, ok := agentcontroller.RefusalOf(err)
	if !ok || ref.Reason != "no-secrets/word" || ref.Message != "Please do not send passwords to the agent." {
		t.Fatalf("refusal: %v\n%s", err, logs.String())
	}
	// The SDK's log handler writes hclog JSON; the host logs it again at
	// its level with its fields, under the plugin's entry.
	var line string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "refusing messages that contain a word") {
			line = l
		}
	}
	if !strings.Contains(line, "[INFO]") || !strings.Contains(line, "word=password") || !strings.Contains(line, "exec:no-secrets") {
		t.Fatalf("the plugin's log line did not reach the host's log as an INFO line of no-secrets with its field: %q\n%s", line, logs.String())
	}
}

// TestPythonPluginBadConfig: an exception in the configure handler fails
// the start with the handler's error, naming the exception.
func TestPythonPluginBadConfig(t *testing.T) {
	requirePython(t)
	yaml := "plugins:\n  - use: llm.scripted\n" +
		pythonEntry(t, "stats", "../../examples/python-tool/dsh_file_stats.py", `{max_files: 0}`) +
		"agents:\n  - id: main\n    provider: scripted\n"
	cfg, err := config.Parse("exec.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err == nil {
		h.Close(stdctx.Background())
	}
	if err == nil || !strings.Contains(err.Error(), "PLUGIN_HANDLER_FAILED") || !strings.Contains(err.Error(), "max_files must be at least 1") {
		t.Fatalf("a configure handler's exception must fail the start with its message: %v", err)
	}
}

// toolTurn runs one turn of agent main, whose scripted model calls tool
// with args and then says "done", and returns the tool messages the
// session recorded.
func toolTurn(t *testing.T, entries, tool, args string) []string {
	t.Helper()
	out, _ := toolTurnLogs(t, entries, tool, args)
	return out
}

// toolTurnLogs is toolTurn that also returns the host's log.
func toolTurnLogs(t *testing.T, entries, tool, args string) ([]string, *logBuffer) {
	t.Helper()
	ws := t.TempDir()
	for name, body := range map[string]string{"a.txt": "one two\nthree\n", "b.txt": "four\n", "secret.key": "x"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: %s, arguments: %q}]
        - text: done
%sagents:
  - id: main
    provider: scripted
    workspace: %q
`, tool, args, entries, ws)
	h, logs := startExec(t, yaml)
	if _, err := send(h, stdctx.Background(), "main", "count the text files"); err != nil {
		t.Fatalf("turn: %v\n%s", err, logs.String())
	}
	a, _ := h.Agent("main")
	var out []string
	for _, ev := range a.Session().Events(1) {
		if ev.Message != nil && ev.Message.Role == "tool" {
			out = append(out, ev.Message.Content)
		}
	}
	if len(out) == 0 {
		t.Fatalf("no tool result in the session\n%s", logs.String())
	}
	return out, logs
}

// TestPythonToolPlugin: the tool a Python binary declares in Describe is
// one the model can call; its result comes back through a real turn.
//
// It needs the host side of binary tools (issue 21, branch bintools).
func TestPythonToolPlugin(t *testing.T) {
	requirePython(t)
	stats := pythonEntry(t, "stats", "../../examples/python-tool/dsh_file_stats.py", "{}")
	got := toolTurn(t, stats, "file_stats", `{"pattern": "*.txt"}`)
	want := "lines words bytes file\n2 3 14 a.txt\n1 1 5 b.txt\n3 4 19 total"
	if got[0] != want {
		t.Fatalf("file_stats result:\n%q\nwant\n%q", got[0], want)
	}
}

// policyScript is a Python approval policy on the SDK: it denies
// file_stats over key files, rewrites "*" to "*.txt", and leaves every
// other call to the policies after it.
const policyScript = `
import json
from dsh_plugin import Plugin, events

plugin = Plugin("no-keys", "1.0.0")

@plugin.approval
def approve(call, next):
    args = json.loads(call.call.arguments or "{}")
    if call.call.name != "file_stats":
        return None
    if args.get("pattern", "").endswith(".key"):
        return events.Verdict(decision="deny", reason="key files stay private", source="no-keys")
    if args.get("pattern") == "*":
        return events.Verdict(decision="allow", source="no-keys", arguments=json.dumps({"pattern": "*.txt"}))
    return None

plugin.serve()
`

// TestPythonApprovalPolicy: a Python policy on tools/approve denies a call
// (the model reads its reason, the tool does not run) and rewrites the
// arguments of another, which then runs with them.
//
// It needs the host side of the approval stage for binaries (issue 21,
// branches bintools and seams).
func TestPythonApprovalPolicy(t *testing.T) {
	requirePython(t)
	policy := filepath.Join(t.TempDir(), "policy.py")
	if err := os.WriteFile(policy, []byte(policyScript), 0o600); err != nil {
		t.Fatal(err)
	}
	entries := pythonEntry(t, "stats", "../../examples/python-tool/dsh_file_stats.py", "{}") +
		pythonEntry(t, "no-keys", policy, "{}")
	denied := toolTurn(t, entries, "file_stats", `{"pattern": "*.key"}`)
	if !strings.Contains(denied[0], "denied") || !strings.Contains(denied[0], "key files stay private") || strings.Contains(denied[0], "secret.key") {
		t.Fatalf("a deny must reach the model with its reason and the tool must not run: %q", denied[0])
	}
	rewritten := toolTurn(t, entries, "file_stats", `{"pattern": "*"}`)
	if !strings.HasSuffix(rewritten[0], "3 4 19 total") || strings.Contains(rewritten[0], "secret.key") {
		t.Fatalf("the policy's arguments must replace the model's: %q", rewritten[0])
	}
}

// listenerScript is a Python notification listener on the SDK: it writes
// the text of a turn's stream chunks to a file, then renames it into place
// once the finish chunk arrives, so the test sees the whole text at once.
const listenerScript = `
import os
from dsh_plugin import Plugin

plugin = Plugin("chunks", "1.0.0")
out = {"path": "", "text": []}

@plugin.configure
def configure(config):
    out["path"] = config["out"]

@plugin.on("agent/stream-chunk")
def chunk(c):
    if c.chunk.kind == "text":
        out["text"].append(c.chunk.text)
    if c.chunk.kind == "finish":
        with open(out["path"] + ".tmp", "w") as f:
            f.write("".join(out["text"]))
        os.rename(out["path"] + ".tmp", out["path"])

plugin.serve()
`

// TestPythonNotifications: a Python listener hears a streamed answer chunk
// by chunk, in order (by Emit, or by EmitBatch once the host batches).
func TestPythonNotifications(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	script, out := filepath.Join(dir, "chunks.py"), filepath.Join(dir, "chunks.txt")
	if err := os.WriteFile(script, []byte(listenerScript), 0o600); err != nil {
		t.Fatal(err)
	}
	answer := strings.Repeat("a streamed answer in many chunks. ", 20)
	yaml := fmt.Sprintf("plugins:\n  - use: llm.scripted\n    config: {replies: [{text: %q}]}\n", answer) +
		pythonEntry(t, "chunks", script, fmt.Sprintf("{out: %q}", out)) +
		"agents:\n  - id: main\n    provider: scripted\n"
	h, logs := startExec(t, yaml)
	if _, err := send(h, stdctx.Background(), "main", "talk"); err != nil {
		t.Fatal(err)
	}
	// Notifications are delivered after the emitter moved on; the file
	// appears once the listener has seen the finish chunk.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := os.ReadFile(out)
		if err == nil {
			if string(got) != answer {
				t.Fatalf("the listener heard %q, want %q", got, answer)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the listener never heard the finish chunk\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// spawnerScript is a Python plugin that starts a process of its own and
// writes that process's id to a file once it serves.
const spawnerScript = `
import os, subprocess
from dsh_plugin import Plugin

plugin = Plugin("spawner", "1.0.0")

@plugin.configure
def configure(config):
    child = subprocess.Popen(["sleep", "300"])
    with open(config["pids"] + ".tmp", "w") as f:
        f.write(str(child.pid))
    os.rename(config["pids"] + ".tmp", config["pids"])

plugin.serve()
`

// TestPythonPluginGroupDiesWithAKilledHost: dsh is SIGKILLed — no teardown
// runs — and the SDK sees the host pipe close and kills the plugin's whole
// group, the process it started included (the kernel's parent-death
// signal reaches only the plugin itself).
func TestPythonPluginGroupDiesWithAKilledHost(t *testing.T) {
	requirePython(t)
	dir := t.TempDir()
	script, pids := filepath.Join(dir, "spawner.py"), filepath.Join(dir, "pids")
	if err := os.WriteFile(script, []byte(spawnerScript), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := "plugins:\n  - use: llm.scripted\n" + pythonEntry(t, "spawner", script, fmt.Sprintf("{pids: %q}", pids)) +
		"agents:\n  - id: main\n    provider: scripted\n"
	cmd := runDSH(t, yaml, func() bool { _, err := os.Stat(pids); return err == nil })
	sleeper := readPIDFile(t, pids)
	cmd.Process.Kill()
	cmd.Wait()
	waitDead(t, sleeper, "the Python plugin's own child")
}

// emptyScript declares a tool that forgets its result and one that is
// empty on purpose.
const emptyScript = `
from dsh_plugin import Plugin, empty

plugin = Plugin("empties", "1.0.0")

@plugin.tool("nothing", "Forgets to return.")
def nothing(args, ctx):
    pass

@plugin.tool("blank", "Answers nothing on purpose.")
def blank(args, ctx):
    return empty()

plugin.serve()
`

// TestPythonEmptyResult: a Python tool returning None is an error result
// naming the plugin and the tool; dsh_plugin.empty() is a chosen empty
// result.
func TestPythonEmptyResult(t *testing.T) {
	requirePython(t)
	script := filepath.Join(t.TempDir(), "plugin.py")
	if err := os.WriteFile(script, []byte(emptyScript), 0o644); err != nil {
		t.Fatal(err)
	}
	entry := pythonEntry(t, "empties", script, "{}")
	got := toolTurn(t, entry, "nothing", "{}")
	if !strings.Contains(got[0], `"nothing"`) || !strings.Contains(got[0], `"empties"`) || !strings.Contains(got[0], "PLUGIN_EMPTY_RESULT") {
		t.Fatalf("a forgotten result: %q", got[0])
	}
	if got := toolTurn(t, entry, "blank", "{}"); got[0] != "" {
		t.Fatalf("a deliberately empty result: %q", got[0])
	}
}
