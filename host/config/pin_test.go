package config_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
)

// TestPinsAndHealthSettings: pin: files resolve from the config file's
// folder like exec:, and a pin that names no file, a missing file or a
// malformed checksum, negative health settings, or pins on a use: entry
// are config problems naming the key.
func TestPinsAndHealthSettings(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"plugin", "plugin.py"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	file := filepath.Join(dir, "config.yaml")
	sum := strings.Repeat("ab", 32)
	good := "plugins:\n  - id: p\n    exec: ./plugin\n    health_interval: 5s\n    health_timeout: 1s\n    pin:\n      - {file: plugin.py, sha256: " + sum + "}\n"
	cfg, err := config.Parse(file, []byte(good), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Plugins[0]
	if e.Pin[0].File != filepath.Join(dir, "plugin.py") || e.HealthInterval.String() != "5s" || e.HealthTimeout.String() != "1s" {
		t.Fatalf("decoded %+v", e)
	}
	for name, c := range map[string]struct{ yaml, want string }{
		"no file":    {"plugins:\n  - id: p\n    exec: ./plugin\n    pin: [{sha256: " + sum + "}]\n", "plugins[0].pin[0].file: the pin names no file"},
		"missing":    {"plugins:\n  - id: p\n    exec: ./plugin\n    pin: [{file: gone.py, sha256: " + sum + "}]\n", "plugins[0].pin[0].file: pinned file \"gone.py\""},
		"bad sum":    {"plugins:\n  - id: p\n    exec: ./plugin\n    pin: [{file: plugin.py, sha256: abc}]\n", "plugins[0].pin[0].sha256: expected 64 hex digits"},
		"negative":   {"plugins:\n  - id: p\n    exec: ./plugin\n    health_timeout: -1s\n", "health_interval and health_timeout cannot be negative"},
		"use: entry": {"plugins:\n  - use: llm.scripted\n    health_interval: 1s\n    pin: [{file: plugin.py, sha256: " + sum + "}]\n", "health_interval and pin: for exec: entries only"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := config.Parse(file, []byte(c.yaml), config.LoadOptions{Environ: []string{}})
			if !errs.HasCode(err, config.Invalid) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want CONFIG_INVALID with %q, got %v", c.want, err)
			}
		})
	}
}
