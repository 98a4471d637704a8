package all_test

import (
	stdctx "context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/tools"
)

// TestEveryBuiltinToolRefusesAnUnknownArgument: every tool a built-in
// registers has a closed schema, so an argument it does not know is
// refused before any policy or the tool sees the call, never silently
// dropped.
func TestEveryBuiltinToolRefusesAnUnknownArgument(t *testing.T) {
	h, svc := builtinTools(t)
	specs := svc.Specs(h.Root())
	if len(specs) < 8 {
		t.Fatalf("only %d built-in tools registered", len(specs))
	}
	for _, s := range specs {
		var schema struct {
			Extra *bool `json:"additionalProperties"`
		}
		if err := json.Unmarshal(s.Parameters, &schema); err != nil || schema.Extra == nil || *schema.Extra {
			t.Errorf("%s: the schema is not closed (additionalProperties: false): %s", s.Name, s.Parameters)
		}
		r, err := svc.Execute(stdctx.Background(), h.Root(), tools.Call{
			AgentID: "a", ID: "c", Name: s.Name, Arguments: json.RawMessage(`{"zz_unknown_argument":1}`), Workspace: t.TempDir(),
		})
		if err != nil || !r.IsError || !strings.Contains(r.Content, "zz_unknown_argument") {
			t.Errorf("%s accepted an unknown argument: %+v %v", s.Name, r, err)
		}
	}
}

// readOnlyTools is what every built-in tool declares about writing: plan
// mode runs only the read-only ones, and a checkpoint is taken before
// every other call. A new tool must take a side here.
var readOnlyTools = map[string]bool{
	"read": true, "list": true, "glob": true, "grep": true, "clock": true,
	"web_fetch": true, "web_search": true,
	"lsp_definition": true, "lsp_references": true, "lsp_hover": true, "lsp_symbols": true,
	"job_output": true, "job_list": true,
	"todo": true, "exit_plan_mode": true, "skill": true,
	"write": false, "edit": false, "job_input": false, "job_kill": false, "agent": false,
}

// TestEveryBuiltinToolSaysWhetherItWrites: each built-in tool declares
// itself read-only or not as the table says; bash decides per command.
func TestEveryBuiltinToolSaysWhetherItWrites(t *testing.T) {
	h, svc := builtinTools(t)
	for _, s := range svc.Specs(h.Root()) {
		tool := svc.Lookup(h.Root(), s.Name)
		if s.Name == "bash" {
			reads, _ := tools.IsReadOnly(tool, tools.Call{Name: "bash", Arguments: json.RawMessage(`{"command":"ls -la"}`), Workspace: t.TempDir()})
			writes, _ := tools.IsReadOnly(tool, tools.Call{Name: "bash", Arguments: json.RawMessage(`{"command":"sed -i s/a/b/ f"}`), Workspace: t.TempDir()})
			if !reads || writes {
				t.Errorf("bash: ls read-only %v, sed -i read-only %v; want true, false", reads, writes)
			}
			continue
		}
		want, listed := readOnlyTools[s.Name]
		if !listed {
			t.Errorf("tool %s is not in readOnlyTools: decide whether it writes", s.Name)
			continue
		}
		if got, _ := tools.IsReadOnly(tool, tools.Call{Name: s.Name}); got != want {
			t.Errorf("%s declares read-only %v, want %v", s.Name, got, want)
		}
	}
}

// builtinTools starts a host with every built-in tools.* plugin mounted
// at the root, closed when the test ends.
func builtinTools(t *testing.T) (*host.Host, *tools.Service) {
	t.Helper()
	var b strings.Builder
	b.WriteString("plugins:\n")
	b.WriteString(entry(t, "llm.scripted"))
	for _, info := range plugin.List() {
		if strings.HasPrefix(info.ID, "tools.") {
			b.WriteString(entry(t, info.ID))
		}
	}
	b.WriteString("agents:\n  - id: a\n    provider: scripted\n")
	cfg, err := config.Parse("tools.yaml", []byte(b.String()), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatalf("config:\n%s\n%v", b.String(), err)
	}
	h, err := host.Start(cfg, host.Options{LogOutput: &strings.Builder{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	svc, err := tools.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	return h, svc
}
