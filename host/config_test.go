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

// TestOverridesAreTypedByTheirField: --set and DSH_ values are text, decoded
// by the type of the field they land on; a string field takes the text as
// is, whatever YAML would have made of it.
func TestOverridesAreTypedByTheirField(t *testing.T) {
	env := []string{
		"DSH_AGENTS__HELPER__SYSTEM_PROMPT=be brief # always",
		"DSH_PLUGINS__MODEL__CONFIG__NAME=#scripted",
	}
	sets := []string{
		"agents.main.system_prompt=#1 rule: be brief",
		"agents.main.model=Note: answer briefly.",
		"agents.main.max_tokens= 100",
		"plugins.model.config.delay=7ms",
		"plugins.model.config.replies=[{text: from a flag}]",
		"plugins.model.config.name=scripted",
	}
	cfg, err := host.Parse("good.yaml", []byte(good), host.LoadOptions{Environ: env, Sets: sets})
	if err != nil {
		t.Fatal(err)
	}
	main, helper := cfg.Agents[0], cfg.Agents[1]
	if main.SystemPrompt != "#1 rule: be brief" || main.Model != "Note: answer briefly." || main.MaxTokens != 100 {
		t.Fatalf("main %+v", main)
	}
	if helper.SystemPrompt != "be brief # always" {
		t.Fatalf("helper system prompt %q", helper.SystemPrompt)
	}
	sc := cfg.PluginConfig(&cfg.Plugins[0]).(*scripted.Config)
	if sc.Delay.Milliseconds() != 7 || len(sc.Replies) != 1 || sc.Replies[0].Text != "from a flag" || sc.Name != "scripted" {
		t.Fatalf("scripted config %+v", sc)
	}
}

// TestOverridesIntoAPluginBinaryConfig: a binary's config has no Go type;
// a plain number or bool is one, anything else stays text.
func TestOverridesIntoAPluginBinaryConfig(t *testing.T) {
	yaml := "plugins:\n  - use: llm.scripted\n  - id: bin\n    exec: /bin/true\n    config: {word: x}\nagents:\n  - id: main\n    provider: scripted\n"
	cfg, err := host.Parse("bin.yaml", []byte(yaml), host.LoadOptions{Environ: []string{}, Sets: []string{
		"plugins.bin.config.word=#1 rule: stop", "plugins.bin.config.count=3", "plugins.bin.config.on=true", "plugins.bin.config.list=[a, b]",
	}})
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Plugins[1].Config
	if c["word"] != "#1 rule: stop" || c["count"] != 3 || c["on"] != true || len(c["list"].([]any)) != 2 {
		t.Fatalf("binary config %#v", c)
	}
}

// TestOverrideErrorsNameTheFlagOrVariable: a bad override is blamed on the
// flag or variable that set it, never on a line of the file.
func TestOverrideErrorsNameTheFlagOrVariable(t *testing.T) {
	// The file decodes first, then each plugin's config: two loads.
	for _, tc := range []struct {
		env, sets []string
		want      []string
	}{{
		sets: []string{"agents.main.max_tokens=lots", "agents.helper.modle=x", "log.json=maybe"},
		want: []string{
			`--set agents.main.max_tokens: agents[0].max_tokens: expected a whole number, got "lots"`,
			`--set agents.helper.modle: agents[1].modle: unknown key "modle"`,
			`--set log.json: log.json: expected true or false, got "maybe"`,
		},
	}, {
		env:  []string{"DSH_PLUGINS__LIMITS__CONFIG__PER_MINUTE=many"},
		sets: []string{"plugins.model.config.replies=[oops"},
		want: []string{
			`environment variable DSH_PLUGINS__LIMITS__CONFIG__PER_MINUTE: plugins[1].config.per_minute: expected a number, got "many"`,
			`--set plugins.model.config.replies: plugins[0].config.replies: expected a list in YAML flow style`,
		},
	}} {
		_, err := host.Parse("good.yaml", []byte(good), host.LoadOptions{Environ: append([]string{}, tc.env...), Sets: tc.sets})
		if !errs.HasCode(err, host.ConfigInvalid) {
			t.Fatalf("got %v", err)
		}
		for _, want := range tc.want {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error lacks %q:\n%v", want, err)
			}
		}
		if strings.Contains(err.Error(), "good.yaml") {
			t.Errorf("an override error is blamed on the file:\n%v", err)
		}
	}
}
