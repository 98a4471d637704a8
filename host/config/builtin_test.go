package config_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugins/admission/ratelimit"
)

// testBuiltins stands in for the shipped presets: the mechanism is checked
// with plugins every build has.
func testBuiltins() []config.BuiltinPreset {
	return []config.BuiltinPreset{
		{Name: "read-only", Entries: []config.Entry{{Use: "admission.rate-limit", Config: map[string]any{"per_minute": 7}}}},
		{Name: "broken", Entries: []config.Entry{{Use: "admission.rate-limit", Config: map[string]any{"per_minute": "often"}}}},
	}
}

func TestBuiltinPresetsNeedNoDefinition(t *testing.T) {
	defer config.SetBuiltinsForTest(testBuiltins)()
	text := workspaceConfig + "    preset: read-only\n"
	cfg, err := config.Parse("b.yaml", []byte(text), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	list := cfg.Presets["read-only"]
	if len(list) != 1 || !cfg.BuiltinPresetInUse("read-only") {
		t.Fatalf("built-in preset not in use: %+v", cfg.Presets)
	}
	if rl := cfg.PluginConfig(&list[0]).(*ratelimit.Config); rl.PerMinute != 7 {
		t.Fatalf("the built-in entry was not decoded: %+v", rl)
	}
	// Unused built-ins stay out: a config that names no mode does not
	// depend on the plugins behind them.
	if _, ok := cfg.Presets["broken"]; ok {
		t.Fatal("an unused built-in preset was added")
	}
}

func TestAConfigsPresetOverridesTheBuiltin(t *testing.T) {
	defer config.SetBuiltinsForTest(testBuiltins)()
	text := "presets:\n  read-only:\n    - use: admission.rate-limit\n      config: {per_minute: 99}\n" + workspaceConfig + "    preset: read-only\n"
	cfg, err := config.Parse("b.yaml", []byte(text), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	list := cfg.Presets["read-only"]
	if cfg.BuiltinPresetInUse("read-only") || cfg.PluginConfig(&list[0]).(*ratelimit.Config).PerMinute != 99 {
		t.Fatal("the config's own read-only preset must win over the built-in one")
	}
}

// TestBuiltinPresetsAreCheckedLikeAnyPreset: a problem in a built-in preset
// is reported, named as built-in (it has no line in the file).
func TestBuiltinPresetsAreCheckedLikeAnyPreset(t *testing.T) {
	defer config.SetBuiltinsForTest(testBuiltins)()
	text := workspaceConfig + "    presets: [broken]\n"
	_, err := config.Parse("b.yaml", []byte(text), config.LoadOptions{Environ: []string{}})
	want := "b.yaml: built-in preset broken[0].config.per_minute: expected a number, got the string \"often\""
	if !errs.HasCode(err, config.Invalid) || !strings.Contains(err.Error(), want) {
		t.Fatalf("want %q, got %v", want, err)
	}
	_, err = config.Parse("b.yaml", []byte(workspaceConfig+"    preset: coding\n"), config.LoadOptions{Environ: []string{}})
	if err == nil || !strings.Contains(err.Error(), `preset "coding" is not defined; defined presets: none; built-in: read-only, broken`) {
		t.Fatalf("an unknown preset must list the built-ins: %v", err)
	}
}
