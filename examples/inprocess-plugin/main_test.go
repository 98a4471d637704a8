package main

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
)

func TestExampleRuns(t *testing.T) {
	var out strings.Builder
	if err := run(&out, configYAML, "main", []string{"hello there", "HELLO THERE", "OK"}); err != nil {
		t.Fatal(err)
	}
	want := `"hello there" answered: [4 words] Counted.
"HELLO THERE" refused (example/shouting): Please do not shout.
"OK" answered: [4 words] Counted.
`
	if out.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestTheToolBelongsToThePresetsAgents: an agent that does not list the
// preset has no word_count, while the root's admission listener still
// governs it.
func TestTheToolBelongsToThePresetsAgents(t *testing.T) {
	two := strings.Replace(configYAML, "agents:\n", "agents:\n  - id: plain\n    provider: scripted\n", 1)
	var out strings.Builder
	if err := run(&out, two, "plain", []string{"hello there", "HELLO THERE"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(out.String(), "\n")
	if strings.Contains(lines[0], "4 words") || !strings.Contains(lines[0], "Counted.") {
		t.Fatalf("the plain agent ran a tool it does not have: %q", lines[0])
	}
	if !strings.Contains(lines[1], "example/shouting") {
		t.Fatalf("the root's listener must hear every agent: %q", lines[1])
	}
}

func TestConfigDefaultsAndRules(t *testing.T) {
	parse := func(entry string) (*config.Config, error) {
		text := "plugins:\n  - use: llm.scripted\n  - use: example.no-shouting\n" + entry +
			"agents:\n  - id: main\n    provider: scripted\n"
		return config.Parse("t.yaml", []byte(text), config.LoadOptions{Environ: []string{}})
	}
	cfg, err := parse("")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.PluginConfig(&cfg.Plugins[1]).(*ShoutingConfig); got.MinLetters != 3 {
		t.Fatalf("an entry without config gets the defaults; got %+v", got)
	}
	_, err = parse("    config: {min_letters: 0}\n")
	if !errs.HasCode(err, config.Invalid) || !strings.Contains(err.Error(), "t.yaml:4: plugins[1].config: min_letters is 0; set at least 1") {
		t.Fatalf("Validate must be a config error naming the line; got %v", err)
	}
}
