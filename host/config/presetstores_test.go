package config_test

import (
	"testing"

	"github.com/dsh-go/dsh/host/config"
)

// TestPresetStoresOncePerDirectory: the catalog mounts each directory
// once — not one a root store writes (preset c, which no agent may mount
// then, but which may stand unused), nor one a preset earlier in name
// order already names (b) — and a relative directory counts by where it
// resolves.
func TestPresetStoresOncePerDirectory(t *testing.T) {
	const text = `
plugins:
  - use: llm.scripted
  - use: session.jsonl
    config: {dir: root}
presets:
  a:
    - use: session.jsonl
      config: {dir: shared}
  b:
    - use: session.jsonl
      config: {dir: ./shared/}
  c:
    - use: session.jsonl
      config: {dir: root}
  d:
    - id: off
      use: session.jsonl
      config: {dir: elsewhere}
      disabled: true
    - use: session.jsonl
      config: {dir: own}
agents:
  - id: one
    provider: scripted
    presets: [a, d]
  - id: two
    provider: scripted
    preset: b
`
	cfg, err := config.Parse("config.yaml", []byte(text), config.LoadOptions{Environ: []string{}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	var at []string
	for _, s := range cfg.PresetStores() {
		at = append(at, s.At)
		if cfg.PluginConfig(s.Entry) == nil {
			t.Fatalf("%s: the entry is not the config's own (no decoded config)", s.At)
		}
	}
	if len(at) != 2 || at[0] != "presets.a[0]" || at[1] != "presets.d[1]" {
		t.Fatalf("preset stores %v, want [presets.a[0] presets.d[1]]", at)
	}
}
