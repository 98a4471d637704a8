package config_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/config"
)

// A store in a preset persists exactly the agents that mount the preset;
// one at the root persists all of them.
func TestPersistsDecidesPerScope(t *testing.T) {
	const text = `
plugins:
  - use: llm.scripted
presets:
  stored:
    - use: session.jsonl
      config: {dir: sessions}
agents:
  - id: kept
    provider: scripted
    preset: stored
    session: main
  - id: gone
    provider: scripted
`
	cfg, err := config.Parse("config.yaml", []byte(text), config.LoadOptions{Environ: []string{}, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("an agent with session: and a store in its preset was refused: %v", err)
	}
	for _, tc := range []struct {
		agent string
		extra []string
		want  bool
	}{
		{"kept", nil, true},
		{"gone", nil, false},
		{"gone", []string{"stored"}, true},
		{"no-such-agent", nil, false},
		{"no-such-agent", []string{"stored"}, true},
		{"gone", []string{"read-only"}, false},
	} {
		if got := cfg.Persists(tc.agent, tc.extra...); got != tc.want {
			t.Errorf("Persists(%q, %v) = %v, want %v", tc.agent, tc.extra, got, tc.want)
		}
	}

	root := strings.Replace(text, "presets:\n  stored:\n    - use: session.jsonl\n      config: {dir: sessions}\n", "", 1)
	root = strings.Replace(root, "    preset: stored\n", "", 1)
	root = strings.Replace(root, "  - use: llm.scripted\n", "  - use: llm.scripted\n  - use: session.jsonl\n    config: {dir: sessions}\n", 1)
	cfg, err = config.Parse("config.yaml", []byte(root), config.LoadOptions{Environ: []string{}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Persists("gone") || !cfg.Persists("no-such-agent") {
		t.Fatal("a store at the root does not persist every agent")
	}

	none := strings.Replace(text, "    preset: stored\n", "", 1)
	_, err = config.Parse("config.yaml", []byte(none), config.LoadOptions{Environ: []string{}, Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), `agents[0].session: session "main" needs a plugin that persists sessions`) {
		t.Fatalf("session: without any store in the agent's scope: %v", err)
	}
}
