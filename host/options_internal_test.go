package host

import (
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agents"
)

// TestAgentOptionsCarryWorkspaceAndCap: what config resolved reaches the
// agent loop — the tools confine themselves to Workspace.
func TestAgentOptionsCarryWorkspaceAndCap(t *testing.T) {
	dir := t.TempDir()
	text := "plugins:\n  - use: llm.scripted\nagents:\n  - id: a\n    provider: scripted\n    model: m\n    workspace: .\n    max_parallel_tools: 4\n"
	cfg, err := config.Parse("o.yaml", []byte(text), config.LoadOptions{Environ: []string{}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := agentOptions(cfg.Agents[0])
	want := agents.Options{Provider: "scripted", Model: "m", Workspace: filepath.Clean(dir), MaxParallelTools: 4}
	if got != want {
		t.Fatalf("options %+v, want %+v", got, want)
	}
}
