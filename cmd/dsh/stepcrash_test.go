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
	"time"
)

// TestAKilledRunKeepsItsCompletedSteps is issue 29's first case through
// `dsh run`: a turn writes k1.txt and k2.txt in two steps and is SIGKILLed
// while its third step's command runs. The next `dsh run --session` finds
// both completed steps in the log, once each, and the call in flight
// closed as interrupted; the workspace and the log agree.
func TestAKilledRunKeepsItsCompletedSteps(t *testing.T) {
	ws := t.TempDir()
	store := filepath.Join(t.TempDir(), "sessions")
	config := func(replies string) string {
		path := filepath.Join(t.TempDir(), "config.yaml")
		text := "plugins:\n  - use: llm.scripted\n    config:\n      replies:\n" + replies +
			fmt.Sprintf("  - use: session.jsonl\n    config: {dir: %q}\n", store) +
			"agents:\n  - id: coder\n    provider: scripted\n    preset: workspace-write\n    workspace: " + ws + "\n    session: crash\nlog:\n  level: warn\n"
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	first := config(`        - tool_calls: [{name: write, arguments: '{"path": "k1.txt", "content": "one"}'}]
        - tool_calls: [{name: write, arguments: '{"path": "k2.txt", "content": "two"}'}]
        - tool_calls: [{name: bash, arguments: '{"command": "sleep 60"}'}]
        - text: never reached
`)
	cmd := exec.Command(dshBin, "run", "--config", first, "--yolo", "-p", "write two files, then wait")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })

	// The third step's call is stored as it starts; kill dsh while the
	// command runs, as a crash would.
	logPath := filepath.Join(store, "crash.jsonl")
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(logPath)
		if strings.Contains(string(b), "sleep 60") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the third step's call never reached the log:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()

	for name, want := range map[string]string{"k1.txt": "one", "k2.txt": "two"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Fatalf("%s: %q %v", name, b, err)
		}
	}
	o := runDsh(t, "", "run", "--config", config("        - text: picking up\n"), "-p", "go on")
	if o.code != 0 {
		t.Fatalf("the resumed run: exit %d\n%s", o.code, o.stderr)
	}

	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// The scripted model numbers its calls per step (call_1 each time),
	// so calls and results pair up in log order.
	type call struct{ id, text string }
	var calls, results []call
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var e struct {
			Type    string `json:"type"`
			Message *struct {
				Content   string `json:"content"`
				ToolCalls []struct {
					ID        string `json:"id"`
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"tool_calls"`
				ToolCallID string `json:"tool_call_id"`
			} `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil || e.Message == nil {
			continue
		}
		switch e.Type {
		case "assistant/message":
			for _, c := range e.Message.ToolCalls {
				calls = append(calls, call{c.ID, c.Name + " " + c.Arguments})
			}
		case "tool/result":
			results = append(results, call{e.Message.ToolCallID, e.Message.Content})
		}
	}
	if len(calls) != 3 || len(results) != 3 {
		t.Fatalf("want the three steps' calls and one result each in the log, got calls %v, results %v", calls, results)
	}
	for i, c := range calls {
		r := results[i]
		if r.id != c.id {
			t.Fatalf("result %d answers %s, want %s (%s)", i, r.id, c.id, c.text)
		}
		inFlight := strings.Contains(c.text, "sleep 60")
		if inFlight != strings.Contains(strings.ToLower(r.text), "interrupted") {
			t.Errorf("call %d (%s): result %q; only the call in flight is closed as interrupted", i, c.text, r.text)
		}
	}
}
