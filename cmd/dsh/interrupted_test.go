package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestAResumeSaysWhichPromptWasInterrupted kills dsh in the middle of a
// streamed answer, after the prompt was made durable, and checks that the
// next run reports the interrupted turn and its prompt, as text and as JSON.
func TestAResumeSaysWhichPromptWasInterrupted(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sessions")
	cfg := writeConfig(t, "        - text: \"a env answer\"\n      delay: 150ms\n",
		fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", dir))
	env := append(os.Environ(), "DSH_CONFIG=", "DSH_AGENTS__MAIN__SESSION=main")

	cmd := exec.Command(dshBin, "run", "--config", cfg, "-p", "remember the milk")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	// The first streamed byte comes after the prompt's checkpoint.
	if _, err := bufio.NewReader(stdout).ReadByte(); err != nil {
		t.Fatalf("no answer streamed before the kill: %v", err)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()

	t.Setenv("DSH_AGENTS__MAIN__SESSION", "main")
	o := runDsh(t, "", "run", "--config", cfg, "-p", "next")
	if o.code != 0 {
		t.Fatalf("resume: exit %d: %s", o.code, o.stderr)
	}
	if !strings.Contains(o.stderr, `the last turn (1) of session main was interrupted; its prompt was "remember the milk"`) {
		t.Fatalf("stderr does not report the interrupted prompt:\n%s", o.stderr)
	}

	// A turn that completed leaves nothing to report; kill one more.
	cmd = exec.Command(dshBin, "run", "--config", cfg, "-p", "buy bread")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if stdout, err = cmd.StdoutPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := bufio.NewReader(stdout).ReadByte(); err != nil {
		t.Fatalf("no answer streamed before the kill: %v", err)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()

	o = runDsh(t, "", "run", "--config", cfg, "--json", "-p", "next")
	if o.code != 0 {
		t.Fatalf("resume --json: exit %d: %s", o.code, o.stderr)
	}
	// The session/opened line comes first, then the interruption.
	_, rest, _ := strings.Cut(o.stdout, "\n")
	first, _, _ := strings.Cut(rest, "\n")
	var line struct {
		Type      string `json:"type"`
		SessionID string `json:"session_id"`
		Turn      int    `json:"turn"`
		Prompt    struct {
			Content string `json:"content"`
		} `json:"prompt"`
	}
	if err := json.Unmarshal([]byte(first), &line); err != nil || line.Type != "session/interrupted" || line.SessionID == "" || line.Prompt.Content != "buy bread" || line.Turn != 3 {
		t.Fatalf("first JSON line %q does not report turn 3 with its prompt (%v)", first, err)
	}
}
