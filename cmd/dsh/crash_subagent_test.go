package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestAKilledSubagentCallIsClosedInBothLogs kills `dsh run` while a
// subagent's turn streams. The parent's log holds the `agent` call (stored
// before it ran) and the child's log the task; the next run closes the
// parent's call as interrupted (it may or may not have run), and the
// child's session stays listed under its parent, interrupted, and
// readable.
func TestAKilledSubagentCallIsClosedInBothLogs(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "sessions")
	cfg := filepath.Join(dir, "config.yaml")
	yaml := `plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls: [{name: agent, arguments: '{"agent": "helper", "prompt": "count slowly", "description": "count"}'}]
        - text: "the helper is done"
  - use: tools.agent
    config:
      agents:
        - {name: helper, description: counts, agent: helper}
  - use: session.jsonl
    config: {dir: ` + store + `}
presets:
  child-model:
    - id: child-model
      use: llm.scripted
      config:
        delay: 50ms
        replies:
          - text: "` + strings.Repeat("count ", 200) + `"
agents:
  - {id: main, provider: scripted, session: parent}
  - {id: helper, provider: scripted, presets: [child-model]}
log: {level: warn}
`
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(dshBin, "run", "--config", cfg, "-p", "delegate")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	var child string
	deadline := time.Now().Add(30 * time.Second)
	for child == "" {
		files, _ := filepath.Glob(filepath.Join(store, "parent.sub-*.jsonl"))
		for _, f := range files {
			if b, _ := os.ReadFile(f); strings.Contains(string(b), `"count slowly"`) {
				child = strings.TrimSuffix(filepath.Base(f), ".jsonl")
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the child's task never reached its log")
		}
		time.Sleep(20 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()

	parent := filepath.Join(store, "parent.jsonl")
	if b, _ := os.ReadFile(parent); !strings.Contains(string(b), `"type":"tool/call"`) {
		t.Fatalf("the parent's agent call is not in its log:\n%s", b)
	}
	list := runDsh(t, "", "sessions", "list", "--config", cfg, "--json")
	if list.code != 0 {
		t.Fatalf("sessions list: %d %s", list.code, list.stderr)
	}
	var rows []struct {
		ID     string `json:"id"`
		Parent string `json:"parent"`
		State  string `json:"state"`
	}
	if err := json.Unmarshal([]byte(list.stdout), &rows); err != nil {
		t.Fatalf("sessions list --json: %v\n%s", err, list.stdout)
	}
	found := false
	for _, r := range rows {
		if r.ID == child {
			found = r.Parent == "parent" && r.State == "interrupted"
		}
	}
	if !found {
		t.Fatalf("the killed child %s is not listed under its parent as interrupted: %s", child, list.stdout)
	}
	if o := runDsh(t, "", "sessions", "show", "--config", cfg, child); o.code != 0 {
		t.Fatalf("the killed child's log does not read: %d %s", o.code, o.stderr)
	}

	// The parent resumes: its call is closed as interrupted, once.
	if o := runDsh(t, "", "run", "--config", cfg, "-p", "again"); o.code != 0 {
		t.Fatalf("the resumed run: %d %s", o.code, o.stderr)
	}
	var results []string
	for _, l := range readJSONL(t, parent) {
		if l["type"] == "tool/result" {
			m, _ := l["message"].(map[string]any)
			if m["tool_call_id"] == "call_1" {
				s, _ := m["content"].(string)
				results = append(results, s)
			}
		}
	}
	if len(results) == 0 || !strings.Contains(results[0], "interrupted") {
		t.Fatalf("the killed call's result: %q; want it closed as interrupted first", results)
	}
}

// readJSONL reads a log's lines as maps.
func readJSONL(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}
