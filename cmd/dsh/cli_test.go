package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestOnlyATerminalIsInteractive: stdin from /dev/null (a character device,
// not a terminal) is an empty prompt, not a session; so is -p "".
func TestOnlyATerminalIsInteractive(t *testing.T) {
	cfg := writeConfig(t, "        - text: hi\n", "")
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd := exec.Command(dshBin, "run", "--config", cfg)
	cmd.Stdin = null
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(errb.String(), "no prompt") || strings.Contains(out.String(), "talking to agent") {
		t.Fatalf("stdin /dev/null: %v\nstdout %q\nstderr %q", err, out.String(), errb.String())
	}
	for _, p := range []string{"", "   "} {
		if o := runDsh(t, "", "run", "--config", cfg, "-p", p); o.code != 2 || !strings.Contains(o.stderr, "-p was given an empty prompt") {
			t.Fatalf("-p %q: exit %d, stderr %q", p, o.code, o.stderr)
		}
	}
}

var (
	testpluginOnce sync.Once
	testpluginBin  string
)

func testplugin(t *testing.T) string {
	t.Helper()
	testpluginOnce.Do(func() {
		bin := filepath.Join(filepath.Dir(dshBin), "testplugin")
		if out, err := exec.Command("go", "build", "-o", bin, "../../host/internal/testplugin").CombinedOutput(); err != nil {
			t.Fatalf("building the test plugin: %v\n%s", err, out)
		}
		testpluginBin = bin
	})
	if testpluginBin == "" {
		t.Fatal("no test plugin")
	}
	return testpluginBin
}

// TestAdmissionFailureSaysWhy: when an admission plugin fails, the user
// reads which plugin and what happened, not only that the check failed.
func TestAdmissionFailureSaysWhy(t *testing.T) {
	bin := testplugin(t)
	named := `plugin "guard" (` + bin + `)`
	for _, tc := range []struct {
		name, entry string
		want        []string
	}{
		{"crash", "config: {crash_word: boom}\n    max_restarts: -1", []string{"PLUGIN_CRASHED: ", named}},
		{"timeout", "config: {hold_word: boom, hold_ms: 5000}\n    timeout: 200ms", []string{"PLUGIN_TIMEOUT: " + named + " did not answer within 200ms"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, "        - text: never\n", "  - id: guard\n    exec: "+bin+"\n    "+tc.entry+"\n")
			o := runDsh(t, "", "run", "--config", cfg, "-p", "boom")
			for _, want := range append(tc.want, `refused: the admission check for agent "main" failed: `) {
				if o.code != 3 || !strings.Contains(o.stderr, want) {
					t.Fatalf("exit %d (want 3)\nstderr %q\nwant it to contain %q", o.code, o.stderr, want)
				}
			}
		})
	}
}

// TestConfigCheckAndRunAgree: what run would refuse at start, config check
// reports first, with file:line, and both exit 2.
func TestConfigCheckAndRunAgree(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte("plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: deepseek\n    session: main\n"), 0o644)
	want := []string{
		`config.yaml:5: agents[0].provider: model provider "deepseek" is not registered`,
		`config.yaml:6: agents[0].session: session "main" needs a plugin that persists sessions`,
	}
	for _, args := range [][]string{{"config", "check"}, {"run", "-p", "hi"}} {
		o := runDsh(t, "", append(args, "--config", path)...)
		for _, w := range want {
			if o.code != 2 || !strings.Contains(o.stderr, w) {
				t.Fatalf("dsh %s: exit %d (want 2)\nstderr %q\nwant it to contain %q", args[0], o.code, o.stderr, w)
			}
		}
	}
}

// TestOverridesReachTheAgentVerbatim: a --set value is the text typed.
func TestOverridesReachTheAgentVerbatim(t *testing.T) {
	cfg := writeConfig(t, "        - text: ok\n", "")
	o := runDsh(t, "", "config", "check", "--config", cfg, "--set", "agents.main.system_prompt=#1 rule: be brief", "--set", "agents.main.model=Note: answer briefly.")
	if o.code != 0 || !strings.Contains(o.stdout, "model=Note: answer briefly.") {
		t.Fatalf("exit %d\nstdout %q\nstderr %q", o.code, o.stdout, o.stderr)
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestReasoningOnItsOwnLinesOnATerminal: on a terminal the reasoning is
// dimmed and the answer starts on a line of its own.
func TestReasoningOnItsOwnLinesOnATerminal(t *testing.T) {
	cfg := writeConfig(t, "        - reasoning: \"let me think\"\n          text: \"The answer.\"\n", "")
	cmd := exec.Command(dshBin, "run", "--config", cfg, "-p", "why?")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=", "NO_COLOR=", "TERM=xterm")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	scr := &screen{}
	copied := make(chan struct{})
	go func() { scr.ReadFrom(tty); close(copied) }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, scr.String())
	}
	select {
	case <-copied:
	case <-time.After(5 * time.Second):
	}
	raw := strings.ReplaceAll(scr.String(), "\r", "")
	if !strings.Contains(raw, "\x1b[2mlet") {
		t.Fatalf("the reasoning is not dimmed: %q", raw)
	}
	if plain := ansi.ReplaceAllString(raw, ""); !strings.Contains(plain, "let me think\nThe answer.\n") {
		t.Fatalf("the reasoning and the answer share a line: %q", plain)
	}
}

func (s *screen) ReadFrom(r interface{ Read([]byte) (int, error) }) {
	buf := make([]byte, 4096)
	for {
		n, err := r.Read(buf)
		s.Write(buf[:n])
		if err != nil {
			return
		}
	}
}
