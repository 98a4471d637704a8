package config_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all"
)

const serveBase = `
plugins:
  - use: llm.scripted
agents:
  - id: coder
    provider: scripted
`

func TestServeConfigProblems(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		want       []string // each must appear in the error, with its line
	}{
		{"listen", "serve:\n  listen: localhost\n", []string{"config.yaml:8: serve.listen: \"localhost\" is not host:port"}},
		{"no auth off loopback", "serve:\n  listen: 0.0.0.0:80\n  no_auth: true\n", []string{"serve.no_auth: no_auth is allowed only on a loopback address"}},
		{"both token sources", "serve:\n  token_env: A\n  token_file: /x\n", []string{"serve.token_file: set token_env or token_file, not both"}},
		{"unknown agent", "serve:\n  agent: nobody\n", []string{`serve.agent: no agent "nobody"; configured agents: coder`}},
		{"unknown preset", "serve:\n  presets: [careful]\n", []string{`serve.presets[0]: preset "careful" is not defined`}},
		{"webhook", "serve:\n  webhooks:\n    \"bad name\":\n      prompt: \"{{.Body\"\n      session: \"../x\"\n",
			[]string{`webhook name "bad name"`, "has no secret_env", "serve.webhooks.bad name.prompt: not a valid text/template", `session id "../x"`}},
		{"schedule", "serve:\n  schedules:\n    - cron: \"61 * * * *\"\n      prompt: hi\n      overlap: later\n    - name: a\n      prompt: \"\"\n",
			[]string{"serve.schedules[0]: the schedule has no name", "serve.schedules[0].cron: \"61 * * * *\"", `"later" is not an overlap policy`, "serve.schedules[1]: the schedule has no cron", "serve.schedules[1].prompt: the prompt is empty"}},
		{"tokens", "serve:\n  tokens:\n    - {name: alice, env: A}\n    - {name: alice, env: B}\n    - {name: \"bad name\", file: /x}\n    - {name: carol}\n    - {name: dan, env: D, file: /d}\n",
			[]string{`serve.tokens[1].name: token name "alice" is also serve.tokens[0]`, `serve.tokens[2].name: token name "bad name"`,
				"config.yaml:12: serve.tokens[3]: set env (the variable holding the token) or file", "serve.tokens[4]: set env"}},
		{"jwt", "serve:\n  jwt:\n    issuer: https://id.example\n    jwks_url: http://id.example/keys\n    algorithms: [HS256]\n",
			[]string{`serve.jwt.jwks_url: "http://id.example/keys" is not an https URL`, `serve.jwt.algorithms[0]: "HS256" is not an algorithm serve accepts`}},
		{"jwt without issuer", "serve:\n  jwt:\n    jwks_url: https://id.example/keys\n", []string{"serve.jwt: jwks_url is set but issuer is not"}},
		{"no auth and tokens", "serve:\n  no_auth: true\n  tokens: [{name: a, env: A}]\n", []string{"serve.no_auth: no_auth serves without any token, and tokens or jwt are set too"}},
		{"duplicate schedule", "serve:\n  schedules:\n    - {name: a, cron: \"@hourly\", prompt: x}\n    - {name: a, cron: \"@daily\", prompt: y}\n",
			[]string{`serve.schedules[1].name: schedule "a" is also serve.schedules[0]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := config.Parse("config.yaml", []byte(serveBase+tc.yaml), config.LoadOptions{Environ: []string{}})
			if err == nil {
				t.Fatal("the config was accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

func TestServeConfigAccepted(t *testing.T) {
	cfg, err := config.Parse("config.yaml", []byte(serveBase+`
serve:
  listen: 127.0.0.1:0
  no_auth: true
  webhooks:
    github:
      secret_env: GH_SECRET
      prompt: "push to {{.Body.repository.full_name}}"
  presets: [workspace-write]       # built-in, and no agent uses it
  schedules:
    - {name: nightly, cron: "CRON_TZ=Europe/Berlin 0 3 * * *", prompt: "run the checks", overlap: queue, presets: [read-only]}
`), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := cfg.ServeAgent(""); !ok || got != "coder" {
		t.Fatalf("ServeAgent(\"\") = %q, %v; want the first agent", got, ok)
	}
	if _, ok := cfg.ServeAgent("nobody"); ok {
		t.Fatal("ServeAgent accepted an unknown agent")
	}
	if cfg.Serve.Webhooks["github"].SecretEnv != "GH_SECRET" || cfg.Serve.Schedules[0].Overlap != config.OverlapQueue {
		t.Fatalf("decoded %+v", cfg.Serve)
	}
}

// A secret held in a DSH_ variable is not read as a config override: the
// default token variable, a token_env and a webhook's secret_env.
func TestServeSecretVariablesAreNotOverrides(t *testing.T) {
	env := []string{"DSH_SERVE_TOKEN=t0k3n", "DSH_MY_TOKEN=x", "DSH_HOOK_SECRET=y", "DSH_ALICE_TOKEN=z", "DSH_AGENTS__CODER__MODEL=m2"}
	cfg, err := config.Parse("config.yaml", []byte(serveBase+`
serve:
  token_env: DSH_MY_TOKEN
  tokens:
    - {name: alice, env: DSH_ALICE_TOKEN}
  webhooks:
    gh: {secret_env: DSH_HOOK_SECRET, prompt: hi}
`), config.LoadOptions{Environ: env})
	if err != nil {
		t.Fatalf("a secret variable was taken for an override: %v", err)
	}
	// Other DSH_ variables still override.
	if ac, _ := cfg.Agent("coder"); ac.Model != "m2" {
		t.Fatalf("DSH_AGENTS__CODER__MODEL no longer overrides: model %q", ac.Model)
	}
}
