package acp_test

import (
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
	dshacp "github.com/dsh-go/dsh/acp"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// TestPlanModeOverACP: an agent with the plan preset opens in the mode
// plan; its todo list reaches the SDK's client side as ACP plan updates,
// a write is refused while it plans, and the editor's approval of
// exit_plan_mode ends plan mode, which the editor hears as a mode change.
func TestPlanModeOverACP(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "todo", Arguments: `{"todos": [{"id": "a", "text": "read the code", "status": "completed"}, {"id": "b", "text": "write the fix", "status": "pending"}]}`}}},
		{ToolCalls: []scripted.Call{{Name: "write", Arguments: `{"path": "x.txt", "content": "x"}`}}},
		{ToolCalls: []scripted.Call{{Name: "exit_plan_mode", Arguments: `{"plan": "# Fix\n\nwrite x.txt"}`}}},
		{Text: "planned"},
	}, extra: "  - use: tools.files\n", agent: "    presets: [plan]\n"})
	if _, err := e.conn.Initialize(e.ctx(), acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	r, err := e.conn.NewSession(e.ctx(), acp.NewSessionRequest{Cwd: e.dir, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Modes == nil || r.Modes.CurrentModeId != dshacp.ModePlan {
		t.Fatalf("a session that starts planning opens in the mode plan: %+v", r.Modes)
	}
	e.c.answers <- acp.NewRequestPermissionOutcomeSelected("allow-once")
	if pr, err := e.prompt(r.SessionId, "plan a fix"); err != nil || pr.StopReason != acp.StopReasonEndTurn {
		t.Fatal(pr, err, dump(e.c.all()))
	}
	p := <-e.c.asked
	if p.ToolCall.Title == nil || !strings.Contains(*p.ToolCall.Title, "leave plan mode") || !strings.Contains(*p.ToolCall.Title, "# Fix") {
		t.Fatalf("the editor is asked to approve the whole plan: %+v", p.ToolCall)
	}
	plan := e.c.waitFor(t, "a plan update", func(u acp.SessionUpdate) bool { return u.Plan != nil && len(u.Plan.Entries) > 0 })
	if len(plan.Plan.Entries) != 2 || plan.Plan.Entries[0].Content != "read the code" ||
		plan.Plan.Entries[0].Status != acp.PlanEntryStatusCompleted || plan.Plan.Entries[1].Status != acp.PlanEntryStatusPending {
		t.Fatalf("plan update %+v", plan.Plan)
	}
	// The session may also announce the mode plan as it opens (the
	// preset's plan mode and the editor's session race to say it first):
	// wait for the change away from it.
	mode := e.c.waitFor(t, "the mode leaving plan", func(u acp.SessionUpdate) bool {
		return u.CurrentModeUpdate != nil && u.CurrentModeUpdate.CurrentModeId != dshacp.ModePlan
	})
	if mode.CurrentModeUpdate.CurrentModeId != dshacp.ModeWorkspaceWrite {
		t.Fatalf("after the approved exit the mode is workspace-write: %+v\n%s", mode.CurrentModeUpdate, dump(e.c.all()))
	}
	if !strings.Contains(agentText(e.c.all()), "# Fix") {
		t.Errorf("the proposed plan is shown as a message: %q", agentText(e.c.all()))
	}
	if _, err := e.conn.SetSessionMode(e.ctx(), acp.SetSessionModeRequest{SessionId: r.SessionId, ModeId: dshacp.ModePlan}); err != nil {
		t.Fatalf("the editor switches back to plan: %v", err)
	}
}
