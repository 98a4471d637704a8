package permission_test

import (
	stdctx "context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	_ "github.com/dsh-go/dsh/plugins/all" // llm.scripted and tools.permission
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// pipelineConfig is what docs-notes/policy.md shows: a root policy for
// every agent and a coding preset for one.
const pipelineConfig = `
plugins:
  - use: llm.scripted
  - id: guard
    use: tools.permission
    config:
      rules:
        - {command: "rm *", decision: deny, reason: "remove files with the edit tools"}
        - {path: "**/.env", decision: deny, reason: "secrets stay out of the model's context"}
presets:
  coding:
    - use: tools.permission
      config:
        mode: workspace-write
        rules:
          - {command: "git *", decision: allow}
          - {command: "go test *", decision: allow}
agents:
  - id: coder
    provider: scripted
    preset: coding
  - id: plain
    provider: scripted
`

// TestThroughTheHost decodes the policy from YAML, mounts it with the core
// services and an agent's preset, and answers tools/approve for calls of
// tools registered in the real tools service.
func TestThroughTheHost(t *testing.T) {
	cfg, err := config.Parse("config.yaml", []byte(pipelineConfig), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	svc, err := tools.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	run := func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: "ran"}, nil }
	for _, tl := range []tools.Tool{{Name: "bash", Approval: tools.Ask, Execute: run}, {Name: "read", ParallelSafe: true, Execute: run}, {Name: "write", Execute: run}} {
		if err := svc.Register(h.Root(), tl); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(agentID, tool string, args any) tools.Verdict {
		t.Helper()
		a, ok := h.Agent(agentID)
		if !ok {
			t.Fatalf("no agent %s", agentID)
		}
		raw, _ := json.Marshal(args)
		call := tools.Call{AgentID: agentID, Name: tool, Arguments: raw, Workspace: workspace}
		v, err := tools.EventApprove.Dispatch(stdctx.Background(), a.Context(), tools.Approval{Call: call, Tool: svc.Lookup(a.Context(), tool)})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cmd := func(c string) map[string]string { return map[string]string{"command": c} }
	cases := []struct {
		agent, tool string
		args        any
		want        tools.Decision
		source      string
	}{
		{"coder", "bash", cmd("git status && go test ./..."), tools.Allow, "tools.permission@coder:rules[0]"},
		{"coder", "bash", cmd("git status && rm -rf ~"), tools.Deny, "tools.permission:rules[0]"},
		{"coder", "bash", cmd("make"), tools.Ask, "tools.permission@coder:mode=workspace-write"},
		{"coder", "write", onPath("main.go"), tools.Allow, "tools.permission@coder:mode=workspace-write"},
		{"coder", "read", onPath("config/.env"), tools.Deny, "tools.permission:rules[1]"},
		{"plain", "bash", cmd("git status"), tools.Ask, ""}, // bash's own default
		{"plain", "bash", cmd("rm x"), tools.Deny, "tools.permission:rules[0]"},
		{"plain", "write", onPath("main.go"), tools.Allow, ""},
	}
	for _, c := range cases {
		if v := ask(c.agent, c.tool, c.args); v.Decision != c.want || v.Source != c.source {
			t.Errorf("%s %s %v: got %+v, want %s from %q", c.agent, c.tool, c.args, v, c.want, c.source)
		}
	}
}

func TestConfigCheckReportsABadRuleWhereItIs(t *testing.T) {
	bad := strings.Replace(pipelineConfig, "decision: allow}", "decision: alow}", 1)
	_, err := config.Parse("config.yaml", []byte(bad), config.LoadOptions{Environ: []string{}})
	if !errs.Has(err, config.Invalid, "") || !strings.Contains(err.Error(), `rules[0].decision: "alow" is not allow, deny or ask`) {
		t.Fatalf("got %v", err)
	}
}
