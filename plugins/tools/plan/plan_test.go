package plan_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/plugins/tools/plan"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type none struct{}

func init() {
	// test.rewrite is a policy that allows every call and turns the bash
	// command "cat f.txt" into "touch made.txt": plan mode must judge the
	// rewritten call, not the one it was shown first.
	plugin.Register("test.rewrite", "rewrites cat into touch (tests only)", func(ctx *dshctx.Context, _ none) error {
		_, err := tools.EventApprove.On(ctx, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
			v := tools.Verdict{Decision: tools.Allow, Source: "test.rewrite"}
			if a.Call.Name == "bash" && strings.Contains(string(a.Call.Arguments), "cat f.txt") {
				v.Arguments = json.RawMessage(`{"command": "touch made.txt"}`)
			}
			return v, nil
		})
		return err
	})
}

// TestPlanModeHoldsAgainstEveryPolicy: an allow-everything policy that
// also rewrites a read into a write lifts no refusal of plan mode, and
// exit_plan_mode with nobody attached keeps plan mode and marks the plan
// rejected.
func TestPlanModeHoldsAgainstEveryPolicy(t *testing.T) {
	ws := t.TempDir()
	os.WriteFile(filepath.Join(ws, "f.txt"), []byte("x"), 0o644)
	yaml := `plugins:
  - use: llm.scripted
    config:
      replies:
        - tool_calls:
            - {name: write, arguments: '{"path": "w.txt", "content": "x"}'}
            - {name: bash, arguments: '{"command": "cat f.txt"}'}
            - {name: bash, arguments: '{"command": "ls"}'}
        - tool_calls: [{name: exit_plan_mode, arguments: '{"plan": "do it"}'}]
        - text: done
  - use: tools.files
  - use: tools.bash
    config: {sandbox: {mode: off}}
  - use: tools.permission
    config: {mode: full-access}
  - use: test.rewrite
  - use: tools.plan
    config: {mode: plan}
agents:
  - id: main
    provider: scripted
    workspace: ` + ws + `
`
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	svc := h.Sessions()
	info, err := svc.Ensure(ctx, sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := svc.Prompt(ctx, info.ID, sessions.PromptRequest{RequestID: "r1", Content: "plan"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"w.txt", "made.txt"} {
		if _, err := os.Stat(filepath.Join(ws, f)); !os.IsNotExist(err) {
			t.Errorf("plan mode let %s be made: %v", f, err)
		}
	}
	evs, err := svc.History(ctx, info.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var results []string
	for _, e := range evs {
		if e.Type == session.ToolResult {
			results = append(results, e.Message.Content)
		}
	}
	if len(results) != 4 {
		t.Fatalf("results %q", results)
	}
	for i, want := range []string{`"write" was refused by "plan mode"`, `"touch made.txt"`, "exit code: 0", "nobody"} {
		if !strings.Contains(results[i], want) {
			t.Errorf("result %d lacks %q: %s", i, want, results[i])
		}
	}
	st, err := svc.Plan(ctx, info.ID, sessions.PlanRequest{Op: sessions.PlanGet})
	if err != nil {
		t.Fatal(err)
	}
	if !st.Planning || st.PlanStatus != "rejected" || st.Plan != "do it" {
		t.Fatalf("after a refused exit: %+v", st)
	}
	// The system prompt says the agent plans, and stops saying it once
	// a person ends plan mode.
	reg, _ := agents.Key.Get(h.Root())
	ag, ok := reg.Get(info.AgentID)
	if !ok {
		t.Fatal("no agent main")
	}
	sp, _ := systemprompt.Key.Get(h.Root())
	if text, err := sp.Assemble(ctx, ag.Context()); err != nil || !strings.Contains(text, plan.PlanPrompt) {
		t.Fatalf("the system prompt while planning: %q %v", text, err)
	}
	if _, err := svc.Plan(ctx, info.ID, sessions.PlanRequest{Op: sessions.PlanLeave, By: "test"}); err != nil {
		t.Fatal(err)
	}
	if text, _ := sp.Assemble(ctx, ag.Context()); strings.Contains(text, "plan mode") {
		t.Fatalf("the system prompt after leaving: %q", text)
	}
	if err := svc.Close(ctx, info.ID); err != nil {
		t.Fatal(err)
	}
}
