package host_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/tools"
)

// TestOpenAgentMountsItsEntries: AgentSpec.Entries land in that agent's
// scope only and go away with it.
func TestOpenAgentMountsItsEntries(t *testing.T) {
	h := factoryHost(t, "open-entries")
	ws := t.TempDir()
	handle, err := h.OpenAgent(stdctx.Background(), host.AgentSpec{ID: "e1", Provider: "scripted", Presets: []string{}, Workspace: ws,
		Entries: []config.Entry{{Use: "tools.clock"}}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := tools.Key.Get(handle.Agent.Context())
	if err != nil {
		t.Fatal(err)
	}
	if svc.Lookup(handle.Agent.Context(), "clock") == nil {
		t.Fatal("the entry's tool is not in the agent's scope")
	}
	other, err := h.OpenAgent(stdctx.Background(), host.AgentSpec{ID: "e2", Provider: "scripted", Presets: []string{}, Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Dispose(stdctx.Background())
	osvc, err := tools.Key.Get(other.Agent.Context())
	if err != nil {
		t.Fatal(err)
	}
	if osvc.Lookup(other.Agent.Context(), "clock") != nil {
		t.Fatal("another agent sees the entry's tool")
	}
	if err := handle.Dispose(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if osvc.Lookup(handle.Agent.Context(), "clock") != nil {
		t.Fatal("the entry outlived its agent")
	}
}

func TestOpenAgentRefusesABadEntry(t *testing.T) {
	h := factoryHost(t, "open-bad-entry")
	for _, e := range []config.Entry{{Use: "no.such.plugin"}, {Exec: "/bin/true"}, {Use: "llm.scripted", Config: map[string]any{"nope": 1}}} {
		_, err := h.OpenAgent(stdctx.Background(), host.AgentSpec{ID: "bad", Provider: "scripted", Presets: []string{}, Workspace: t.TempDir(), Entries: []config.Entry{e}})
		if !errs.HasCode(err, host.SpecInvalid) || errs.ReasonOf(err) != host.ReasonSpecEntries {
			t.Fatalf("%+v: %v", e, err)
		}
		if _, ok := h.Agent("bad"); ok {
			t.Fatal("a refused open left its agent")
		}
	}
}
