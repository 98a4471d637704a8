package host_test

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/plugins/admission/ratelimit"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestConfigErrorsGolden loads each file under testdata/bad and compares
// the whole error text with its .golden file.
func TestConfigErrorsGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/bad/*.yaml")
	if len(files) == 0 {
		t.Fatal("no test files")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			_, err := host.Load(host.LoadOptions{Path: file, Environ: []string{}})
			if !errs.HasCode(err, host.ConfigInvalid) {
				t.Fatalf("want CONFIG_INVALID, got %v", err)
			}
			golden := strings.TrimSuffix(file, ".yaml") + ".golden"
			got := err.Error() + "\n"
			if *update {
				os.WriteFile(golden, []byte(got), 0o644)
			}
			want, rerr := os.ReadFile(golden)
			if rerr != nil {
				t.Fatalf("missing golden file (run go test ./host -update): %v", rerr)
			}
			if got != string(want) {
				t.Fatalf("error text changed\n--- got\n%s--- want\n%s", got, want)
			}
		})
	}
}

func TestMissingFile(t *testing.T) {
	_, err := host.Load(host.LoadOptions{Path: "testdata/nope.yaml", Environ: []string{}})
	if !errs.HasCode(err, host.ConfigInvalid) || !strings.Contains(err.Error(), `"testdata/nope.yaml" not found`) || !strings.Contains(err.Error(), "--config") {
		t.Fatalf("got %v", err)
	}
	// Without --config, DSH_CONFIG names the file.
	_, err = host.Load(host.LoadOptions{Environ: []string{"DSH_CONFIG=testdata/also-nope.yaml"}})
	if err == nil || !strings.Contains(err.Error(), "also-nope.yaml") {
		t.Fatalf("DSH_CONFIG ignored: %v", err)
	}
}

const good = `
plugins:
  - id: model
    use: llm.scripted
    config:
      delay: 5ms
      replies:
        - text: hello
  - id: limits
    use: admission.rate-limit
    config: {per_minute: 10}
agents:
  - id: main
    provider: scripted
    model: small
  - id: helper
    provider: scripted
log:
  level: info
`

func TestGoodConfigDecodesPluginConfigs(t *testing.T) {
	cfg, err := host.Parse("good.yaml", []byte(good), host.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := cfg.PluginConfig(&cfg.Plugins[0]).(*scripted.Config)
	if !ok || sc.Delay.Milliseconds() != 5 || sc.Replies[0].Text != "hello" {
		t.Fatalf("scripted config %#v", cfg.PluginConfig(&cfg.Plugins[0]))
	}
	rl := cfg.PluginConfig(&cfg.Plugins[1]).(*ratelimit.Config)
	if rl.PerMinute != 10 {
		t.Fatalf("rate limit %#v", rl)
	}
}

func TestEnvThenFlagOverrides(t *testing.T) {
	env := []string{
		"DSH_AGENTS__MAIN__MODEL=from-env",
		"DSH_AGENTS__1__MODEL=helper-env",
		"DSH_LOG__LEVEL=debug",
		"DSH_PLUGINS__LIMITS__CONFIG__PER_MINUTE=99",
		"HOME=/root", // not ours
	}
	cfg, err := host.Parse("good.yaml", []byte(good), host.LoadOptions{Environ: env})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agents[0].Model != "from-env" || cfg.Agents[1].Model != "helper-env" || cfg.Log.Level != "debug" {
		t.Fatalf("env overrides: %+v %+v", cfg.Agents, cfg.Log)
	}
	if rl := cfg.PluginConfig(&cfg.Plugins[1]).(*ratelimit.Config); rl.PerMinute != 99 {
		t.Fatalf("env override into a plugin config: %v", rl.PerMinute)
	}
	cfg, err = host.Parse("good.yaml", []byte(good), host.LoadOptions{Environ: env, Sets: []string{"agents.main.model=from-flag", "log.level=warn"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Agents[0].Model != "from-flag" || cfg.Log.Level != "warn" || cfg.Agents[1].Model != "helper-env" {
		t.Fatalf("flags must win over env: %+v %+v", cfg.Agents, cfg.Log)
	}
	_, err = host.Parse("good.yaml", []byte(good), host.LoadOptions{Environ: []string{"DSH_AGENTS__GHOST__MODEL=x"}, Sets: []string{"novalue"}})
	if err == nil || !strings.Contains(err.Error(), "DSH_AGENTS__GHOST__MODEL") || !strings.Contains(err.Error(), `--set "novalue"`) {
		t.Fatalf("bad overrides: %v", err)
	}
}
