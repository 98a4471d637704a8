package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/session"
)

// TestSessionsListPagesByAgentFromTheCatalog: dsh sessions list --agent
// --limit lists one agent's sessions a page at a time, newest first,
// the cursor on stderr leading to the next page; a provider that cannot
// start (no key) is not started.
func TestSessionsListPagesByAgentFromTheCatalog(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.yaml")
	cfg := fmt.Sprintf(`plugins:
  - use: llm.scripted
    config: {replies: [{text: "ok"}]}
  - use: session.jsonl
    config: {dir: %q}
agents:
  - id: main
    provider: scripted
  - id: other
    provider: scripted
log: {level: warn}
`, filepath.Join(dir, "sessions"))
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, agent := range []string{"main", "other", "main", "main"} {
		if out := runDsh(t, "", "--config", file, "run", "--agent", agent, "--session", fmt.Sprintf("s%d", i), "-p", "hi"); out.code != 0 {
			t.Fatalf("dsh run: %+v", out)
		}
	}
	keyed := strings.Replace(cfg, "plugins:\n", "plugins:\n  - use: llm.deepseek\n", 1)
	if err := os.WriteFile(file, []byte(keyed), 0o644); err != nil {
		t.Fatal(err)
	}
	page := func(args ...string) ([]string, string) {
		t.Helper()
		cmd := exec.Command(dshBin, append([]string{"--config", file, "sessions", "list", "--json", "--agent", "main", "--limit", "2"}, args...)...)
		cmd.Env = append(os.Environ(), "DSH_CONFIG=", "DEEPSEEK_API_KEY=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("dsh sessions list: %v: %s", err, stderr.String())
		}
		out := struct{ stderr string }{stderr.String()}
		var list []session.Summary
		if err := json.Unmarshal(stdout.Bytes(), &list); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range list {
			ids = append(ids, s.ID)
		}
		_, cursor, _ := strings.Cut(out.stderr, "more sessions follow: --cursor ")
		cursor, _, _ = strings.Cut(cursor, "\n")
		if cursor == "" && out.stderr != "" {
			t.Logf("stderr: %s", out.stderr)
		}
		return ids, cursor
	}
	first, cursor := page()
	if strings.Join(first, ",") != "s3,s2" || cursor == "" {
		t.Fatalf("the first page is %v, cursor %q", first, cursor)
	}
	if second, next := page("--cursor", cursor); strings.Join(second, ",") != "s0" || next != "" {
		t.Fatalf("the second page is %v, cursor %q", second, next)
	}
}
