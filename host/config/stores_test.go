package config_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/admission/ratelimit"
)

func parseIn(t *testing.T, dir, text string) (*config.Config, error) {
	t.Helper()
	return config.Parse("s.yaml", []byte(text), config.LoadOptions{Environ: []string{}, Dir: dir})
}

// TestStoresSharingADirAreRefused: session.jsonl at the root and in a
// preset, or in two presets of one agent, with the same dir would lock
// each other out of the agent's session at run time.
func TestStoresSharingADirAreRefused(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(dir, "sessions")
	cases := map[string]struct {
		text  string
		wants []string
	}{
		"root and preset": {`
plugins:
  - use: llm.scripted
  - use: session.jsonl
    config: {dir: sessions}
presets:
  audited:
    - id: audit-log
      use: session.jsonl
      config: {dir: ` + abs + `}
agents:
  - id: a
    provider: scripted
    preset: audited
`, []string{`agents[0]`, `plugins[1] (id "session.jsonl")`, `presets.audited[0] (id "audit-log")`, `"` + abs + `"`, `agent "a"'s session`, "give them different dir: values"}},
		"two presets of one agent": {`
plugins:
  - use: llm.scripted
presets:
  one:
    - use: session.jsonl
      config: {dir: sessions}
  two:
    - use: session.jsonl
      config: {dir: ./sessions/}
agents:
  - id: a
    provider: scripted
    presets: [one, two]
`, []string{`presets.one[0] (id "session.jsonl")`, `presets.two[0] (id "session.jsonl")`, `"` + abs + `"`}},
		"two at the root": {`
plugins:
  - use: llm.scripted
  - use: session.jsonl
  - id: again
    use: session.jsonl
`, []string{`plugins[2]`, `plugins[1] (id "session.jsonl") and plugins[2] (id "again")`, `every agent's session`}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseIn(t, dir, c.text)
			if !errs.HasCode(err, config.Invalid) {
				t.Fatalf("want CONFIG_INVALID, got %v", err)
			}
			for _, w := range c.wants {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestStoresInTheirOwnDirsAreFine(t *testing.T) {
	dir := t.TempDir()
	_, err := parseIn(t, dir, `
plugins:
  - use: llm.scripted
  - use: session.jsonl
  - id: disabled-twin
    use: session.jsonl
    disabled: true
presets:
  audited:
    - use: session.jsonl
      config: {dir: audit}
  other:
    - use: session.jsonl
agents:
  - id: a
    provider: scripted
    preset: audited
  - id: b
    provider: scripted
`)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := parseIn(t, dir, "plugins:\n  - use: session.jsonl\n")
	// A preset no configured agent combines with the root store is still
	// found when an agent is opened with it.
	cfg2, err := parseIn(t, dir, `
plugins:
  - use: session.jsonl
presets:
  same:
    - use: session.jsonl
`)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg2.StoreConflicts("x", []string{"same"}); len(got) != 1 || !strings.Contains(got[0], `presets.same[0]`) {
		t.Fatalf("conflicts for an opened agent: %q", got)
	}
	if got := cfg.StoreConflicts("x", nil); len(got) != 0 {
		t.Fatalf("a lone root store conflicts: %q", got)
	}
}

// TestUnusedBuiltinPresetsAreReadyForOpenedAgents: a built-in preset no
// configured agent names is checked and decoded at Load, its problems kept
// for whoever asks for it.
func TestUnusedBuiltinPresetsAreReadyForOpenedAgents(t *testing.T) {
	defer config.SetBuiltinsForTest(testBuiltins)()
	cfg, err := config.Parse("b.yaml", []byte("presets:\n  mine:\n    - use: llm.scripted\n"), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatalf("an unusable unused built-in failed the config: %v", err)
	}
	if _, ok := cfg.Presets["read-only"]; ok {
		t.Fatal("an unused built-in was put among the config's presets")
	}
	list, err := cfg.Preset("read-only")
	if err != nil || len(list) != 1 {
		t.Fatalf("Preset(read-only) = %v, %v", list, err)
	}
	if rl := cfg.PluginConfig(&list[0]).(*ratelimit.Config); rl.PerMinute != 7 {
		t.Fatalf("not decoded: %+v", rl)
	}
	if _, err := cfg.Preset("broken"); !errs.HasCode(err, config.Invalid) || !strings.Contains(err.Error(), "per_minute") {
		t.Fatalf("a broken built-in: %v", err)
	}
	_, err = cfg.Preset("nope")
	if !errs.HasCode(err, config.Invalid) || !strings.Contains(err.Error(), "defined presets: mine; built-in: read-only, broken") {
		t.Fatalf("unknown preset: %v", err)
	}
	if list, _ := cfg.Preset("mine"); len(list) != 1 {
		t.Fatal("the config's own preset")
	}
	if a, ok := cfg.Agent("none"); ok {
		t.Fatalf("Agent(none) = %+v", a)
	}
}
