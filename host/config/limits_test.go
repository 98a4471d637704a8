package config_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/config"
)

// An agent's limits win key by key over the top-level ones; a negative
// limit is refused with its key path.
func TestLimitsMergeAndCheck(t *testing.T) {
	yaml := "plugins:\n  - use: llm.scripted\nlimits: {max_tool_calls: 16, max_text_bytes: 4096}\nagents:\n  - id: a\n    provider: scripted\n    limits: {max_tool_calls: 4}\n  - id: b\n    provider: scripted\n"
	cfg, err := config.Parse("l.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	a, b := cfg.Agents[0].Limits, cfg.Agents[1].Limits
	if a.MaxToolCalls != 4 || a.MaxTextBytes != 4096 || b.MaxToolCalls != 16 || b.MaxTextBytes != 4096 {
		t.Fatalf("merged limits: a %+v, b %+v", a, b)
	}
	_, err = config.Parse("l.yaml", []byte("plugins:\n  - use: llm.scripted\nagents:\n  - id: a\n    provider: scripted\n    limits: {max_tool_calls: -1}\n"), config.LoadOptions{Environ: []string{}, Dir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "agents[0].limits.max_tool_calls is -1") {
		t.Fatalf("want the negative limit named, got %v", err)
	}
}
