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
	defer h.Close(stdctx.Background())
	svc, err := tools.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
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
