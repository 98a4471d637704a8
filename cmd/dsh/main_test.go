package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/sdk"
)

var dshBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dsh-cli-test")
	if err != nil {
		panic(err)
	}
	dshBin = filepath.Join(dir, "dsh")
	if out, err := exec.Command("go", append(append([]string{"build"}, buildFlags...), "-o", dshBin, ".")...).CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// writeConfig writes a config whose scripted model gives replies.
func writeConfig(t *testing.T, replies string, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	cfg := "plugins:\n  - use: llm.scripted\n    config:\n      replies:\n" + replies + "  - use: tools.clock\n" + extra +
		"agents:\n  - id: main\n    provider: scripted\nlog:\n  level: warn\n"
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type outcome struct {
	code           int
	stdout, stderr string
}

func runDsh(t *testing.T, stdin string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(dshBin, args...)
	cmd.Env = append(os.Environ(), "DSH_CONFIG=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader(stdin)
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return outcome{code, out.String(), errb.String()}
}

func TestHeadlessExitCodesAndStreams(t *testing.T) {
	cases := []struct {
		name    string
		replies string
		extra   string
		code    int
		stdout  string
		stderr  string
	}{
		{"completed with a tool call", "        - text: \"checking \"\n          tool_calls: [{name: clock}]\n        - text: done\n", "", 0, "checking \ndone\n", "→ clock {}"},
		{"model error", "        - finish: error\n          error: overloaded\n", "", 1, "", "overloaded"},
		{"max tokens", "        - text: cut\n          finish: max-tokens\n", "", 4, "cut\n", ""},
		{"refused", "        - text: never\n", "  - use: admission.ready-gate\n    config: {timeout: 10ms}\n", 3, "", "refused: agent \"main\" is not ready yet"},
		{"budget spent mid-turn", "        - text: \"checking \"\n          tool_calls: [{name: clock}]\n          usage: {input_tokens: 500}\n        - text: never\n",
			"  - use: admission.budget\n    config: {limits: [{name: s, per: session, tokens: 100}]}\n", 3, "checking \n", "turn stopped: budget/tokens: budget \"s\": session"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, tc.replies, tc.extra)
			o := runDsh(t, "", "run", "--config", cfg, "-p", "hello")
			if o.code != tc.code || o.stdout != tc.stdout || !strings.Contains(o.stderr, tc.stderr) {
				t.Fatalf("exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want it to contain %q)", o.code, tc.code, o.stdout, tc.stdout, o.stderr, tc.stderr)
			}
		})
	}
}

func TestPromptFromStdinAndJSON(t *testing.T) {
	cfg := writeConfig(t, "        - text: hi there\n", "")
	o := runDsh(t, "from stdin\n", "run", "--config", cfg, "--json")
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	var types []string
	for _, line := range strings.Split(strings.TrimSpace(o.stdout), "\n") {
		var ev struct {
			Type    string `json:"type"`
			Message *struct {
				Content string `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		if ev.Type == "decision" {
			continue // the admission record: decision records test it
		}
		types = append(types, ev.Type)
		if ev.Type == "user/message" && ev.Message.Content != "from stdin" {
			t.Fatalf("prompt %q", ev.Message.Content)
		}
	}
	// The opened line, the session events, then the usage line.
	if types[0] != "session/opened" || types[1] != "turn/start" || types[len(types)-2] != "turn/end" || types[len(types)-1] != "session/usage" {
		t.Fatalf("events %v", types)
	}
	if o := runDsh(t, "", "run", "--config", cfg); o.code != 2 || !strings.Contains(o.stderr, "no prompt") {
		t.Fatalf("empty stdin: %d %q", o.code, o.stderr)
	}
}

func TestInterruptExits130(t *testing.T) {
	cfg := writeConfig(t, "        - text: \"a b c d e f g h i j k l m n o p\"\n", "")
	os.WriteFile(cfg, []byte(strings.Replace(mustRead(t, cfg), "      replies:", "      delay: 200ms\n      replies:", 1)), 0o644)
	cmd := exec.Command(dshBin, "run", "--config", cfg, "-p", "slow please")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The first word of the answer says the turn runs, and dsh handles
	// SIGINT by then; a fixed sleep would race a slow start.
	first := make([]byte, 1)
	if _, err := io.ReadFull(stdout, first); err != nil {
		t.Fatalf("no answer began: %v (stderr %q)", err, errb.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 130 {
		t.Fatalf("want exit 130, got %v (stderr %q)", err, errb.String())
	}
}

func mustRead(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestConfigCheckAndPlugins(t *testing.T) {
	cfg := writeConfig(t, "        - text: x\n", "")
	o := runDsh(t, "", "config", "check", "--config", cfg)
	if o.code != 0 || !strings.Contains(o.stdout, "main  provider=scripted") || !strings.HasSuffix(o.stdout, "ok\n") {
		t.Fatalf("check: %d %q %q", o.code, o.stdout, o.stderr)
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("agents:\n  - id: main\n    provder: x\n"), 0o644)
	o = runDsh(t, "", "config", "check", "--config", bad)
	if o.code != 2 || !strings.Contains(o.stderr, `bad.yaml:3: agents[0].provder: unknown key "provder"`) {
		t.Fatalf("bad check: %d %q", o.code, o.stderr)
	}
	o = runDsh(t, "", "plugins")
	if o.code != 0 || !strings.Contains(o.stdout, "admission.rate-limit") || !strings.Contains(o.stdout, "llm.scripted") {
		t.Fatalf("plugins: %q", o.stdout)
	}
	// Logs go to stderr, never into the answer.
	o = runDsh(t, "", "run", "--config", cfg, "--log-level", "debug", "-p", "x")
	if o.code != 0 || o.stdout != "x\n" || o.stderr == "" {
		t.Fatalf("log split: %d stdout %q", o.code, o.stdout)
	}
}

func TestShippedConfigRunsOffline(t *testing.T) {
	o := runDsh(t, "", "run", "--config", "../../config.yaml", "-p", "hi")
	if o.code != 0 || !strings.Contains(o.stdout, "Hello!") || !strings.Contains(o.stderr, "→ clock") {
		t.Fatalf("shipped config: %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
}

func TestVersion(t *testing.T) {
	o := runDsh(t, "", "--version")
	want := fmt.Sprintf(", %s %s/%s, plugin protocol %d\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, sdk.ProtocolVersion)
	if o.code != 0 || !strings.HasPrefix(o.stdout, "dsh ") || !strings.HasSuffix(o.stdout, want) {
		t.Fatalf("--version: exit %d, %q; want \"dsh <version>…%s\"", o.code, o.stdout, want)
	}
}

// TestASessionSurvivesRestarts: with session.jsonl and a session id, a
// second dsh run continues the first one's session.
func TestASessionSurvivesRestarts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	cfg := writeConfig(t, "        - text: noted\n", fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", dir))
	t.Setenv("DSH_AGENTS__MAIN__SESSION", "main")
	for _, prompt := range []string{"first", "second"} {
		if o := runDsh(t, "", "run", "--config", cfg, "-p", prompt); o.code != 0 {
			t.Fatalf("run %q: exit %d: %s", prompt, o.code, o.stderr)
		}
	}
	raw, err := os.ReadFile(filepath.Join(dir, "main.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var users []string
	for i, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e struct {
			Seq     int64  `json:"seq"`
			Type    string `json:"type"`
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Seq != int64(i)+1 {
			t.Fatalf("line %d: seq %d, %v", i+1, e.Seq, err)
		}
		if e.Type == "user/message" {
			users = append(users, e.Message.Content)
		}
	}
	if strings.Join(users, ",") != "first,second" {
		t.Fatalf("the session file holds the prompts %v", users)
	}
}
