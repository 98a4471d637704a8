package main

import (
	"os"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
)

// TestSessionsListAndShowStartNoProvider: listing and showing stored
// sessions mounts only the store. A config whose model provider cannot
// start here (no API key) used to make both exit 1.
func TestSessionsListAndShowStartNoProvider(t *testing.T) {
	url := natstest.Single(t).ClientURL()
	file := clusterConfig(t, url, "host-a")
	if out := runDsh(t, "", "--config", file, "run", "--session", "s1", "-p", "hi"); out.code != 0 {
		t.Fatalf("dsh run: %+v", out)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	// The same config with a provider that needs a key nobody gave.
	keyed := strings.Replace(string(raw), "plugins:\n", "plugins:\n  - use: llm.deepseek\n", 1)
	if err := os.WriteFile(file, []byte(keyed), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"DEEPSEEK_API_KEY="}
	if out := runDshEnv(t, env, "--config", file, "sessions", "list", "--json"); out.code != 0 || !strings.Contains(out.stdout, `"id":"s1"`) || !strings.Contains(out.stdout, `"last_seq":`) {
		t.Fatalf("dsh sessions list with a provider lacking its key: %+v", out)
	}
	if out := runDshEnv(t, env, "--config", file, "sessions", "show", "s1"); out.code != 0 || !strings.Contains(out.stdout, "s1") {
		t.Fatalf("dsh sessions show with a provider lacking its key: %+v", out)
	}
	if out := runDshEnv(t, env, "--config", file, "sessions", "show", "nope"); out.code != exitNotFound {
		t.Fatalf("dsh sessions show of a session never stored: %+v", out)
	}
}
