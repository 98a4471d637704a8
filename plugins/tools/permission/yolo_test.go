package permission_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// yoloConfig runs the real bash tool (unsandboxed, so the test is about
// the policy alone) under a root deny rule for rm.
const yoloConfig = `
plugins:
  - use: llm.scripted
  - use: tools.bash
    config: {sandbox: {mode: "off"}}
  - use: tools.permission
    config:
      rules:
        - {command: "rm *", decision: deny, reason: "remove files with the edit tools"}
agents:
  - id: main
    provider: scripted
`

// TestADenyHoldsUnderYolo runs bash calls through the host's tools
// pipeline with an answerer that allows every ask, as dsh run --yolo and
// --allow bash do: a command that names rm only at run time is denied
// before anyone is asked, and the file it would remove is still there.
func TestADenyHoldsUnderYolo(t *testing.T) {
	cfg, err := config.Parse("config.yaml", []byte(yoloConfig), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	agent, ok := h.Agent("main")
	if !ok {
		t.Fatal("no agent main")
	}
	answers, err := approval.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	var asked atomic.Int32
	detach, err := answers.Attach("main", func(stdctx.Context, approval.Request) (approval.Answer, error) {
		asked.Add(1)
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	svc, err := tools.Key.Get(agent.Context())
	if err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	run := func(command string) tools.Result {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"command": command})
		r, err := svc.Execute(stdctx.Background(), agent.Context(), tools.Call{AgentID: "main", ID: "c1", Name: "bash", Arguments: args, Workspace: ws})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	victim := filepath.Join(ws, "f")
	for _, command := range []string{"X=rm; $X -f f", `"$(which rm)" -rf f`, "echo rm -f f | sh", `$'\x72m' -f f`, "{rm,-f,f}", ". <(echo rm -f f)"} {
		if err := os.WriteFile(victim, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(command)
		if !r.IsError || !strings.Contains(r.Content, "was denied") || !strings.Contains(r.Content, "rules[0]") {
			t.Errorf("%q: got %+v, want a denial by the rm rule", command, r)
		}
		if _, err := os.Stat(victim); err != nil {
			t.Errorf("%q ran: %v", command, err)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Fatalf("the answerer was asked %d times about denied calls", n)
	}
	// The same pipeline runs what the policy only asks about once the
	// answerer allows it: the denials above are the policy's, not a
	// pipeline that runs nothing.
	if r := run("touch g && rm f"); !r.IsError {
		t.Fatalf("touch && rm ran: %+v", r)
	}
	if r := run("touch g"); r.IsError {
		t.Fatalf("touch g: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(ws, "g")); err != nil || asked.Load() != 1 {
		t.Fatalf("touch g did not run after one ask (asked %d): %v", asked.Load(), err)
	}
}
