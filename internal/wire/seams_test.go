package wire_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/wire"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
)

// TestApprovalTravelsAndOnlyArgumentsChange: a plugin's payload for next
// changes the call's arguments and nothing else; a verdict comes back
// whole.
func TestApprovalTravelsAndOnlyArgumentsChange(t *testing.T) {
	tool := &tools.Tool{Name: "bash", ParallelSafe: false, Approval: tools.Ask}
	a := tools.Approval{Tool: tool, Call: tools.Call{AgentID: "main", ID: "c1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`), Workspace: "/w", Unattended: true,
		Sources: []llm.Provenance{{Principal: llm.Principal{Kind: "agent", ID: "parent"}, Entry: "subagent", OnBehalfOf: &llm.Principal{Kind: "token", ID: "alice", Tenant: "acme"}}}}}
	w := trip(t, wire.Approval(a))
	if g := w.GetApproval(); g.GetToolDefault() != "ask" || !g.GetUnattended() || g.GetWorkspace() != "/w" || g.GetCall().GetArguments() != `{"command":"ls"}` {
		t.Fatalf("payload %v", g)
	}
	if s := w.GetApproval().GetSources(); len(s) != 1 || s[0].GetEntry() != "subagent" || s[0].GetPrincipal().GetId() != "parent" ||
		s[0].GetOnBehalfOf().GetId() != "alice" || s[0].GetOnBehalfOf().GetTenant() != "acme" {
		t.Fatalf("sources %v", s)
	}
	w.GetApproval().AgentId, w.GetApproval().Call.Name = "other", "rm"
	w.GetApproval().Call.Arguments = `{"command":"ls -l"}`
	got, err := wire.ApplyApproval(a, w)
	if err != nil || got.Call.AgentID != "main" || got.Call.Name != "bash" || string(got.Call.Arguments) != `{"command":"ls -l"}` || got.Tool != tool {
		t.Fatalf("applied %+v %v", got.Call, err)
	}
	w.GetApproval().Call.Arguments = `{"command":`
	if _, err := wire.ApplyApproval(a, w); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("arguments that are not JSON: %v", err)
	}

	v := tools.Verdict{Decision: tools.Deny, Reason: "no", Pattern: "git", Source: "me", PolicyVersion: "v7", Arguments: json.RawMessage(`{"x":1}`)}
	back, err := wire.VerdictFrom(a, trip(t, wire.Verdict(v)))
	if err != nil || !reflect.DeepEqual(back, v) {
		t.Fatalf("verdict %+v %v", back, err)
	}
}

func TestAVerdictTheHostCannotReadIsAnError(t *testing.T) {
	for _, bad := range []tools.Verdict{{Decision: "maybe"}, {Decision: tools.Allow, Arguments: json.RawMessage(`{`)}} {
		if _, err := wire.VerdictFrom(tools.Approval{}, wire.Verdict(bad)); err == nil {
			t.Errorf("%+v was read", bad)
		}
	}
	if _, err := wire.VerdictFrom(tools.Approval{}, wire.Continue(true)); err == nil {
		t.Error("a result of another event was read as a verdict")
	}
}

func TestSessionAndApprovalNotificationsNameTheirAgent(t *testing.T) {
	scope, p := wire.SessionOutcome(sessions.Outcome{Kind: sessions.OutcomePromptRejected, AgentID: "main@s1", Session: "s1", Code: sessions.PromptRejected, Reason: "x/y"})
	if o := trip(t, p).GetSessionOutcome(); scope != "main@s1" || o.GetAgentId() != "main@s1" || o.GetCode() != "SESSION_PROMPT_REJECTED" || o.GetTime() != "" {
		t.Fatalf("%s %v", scope, o)
	}
	req := approval.Request{AgentID: "main", CallID: "c1", Tool: "bash", Arguments: json.RawMessage(`{}`), Pattern: "git"}
	if scope, p := wire.ApprovalRequested(req); scope != "main" || p.GetApprovalRequested().GetPattern() != "git" {
		t.Fatalf("%s %v", scope, p)
	}
	_, p = wire.ApprovalAnswered(approval.Answered{Request: req, Answer: approval.Answer{Choice: approval.Deny},
		Err: errs.New(approval.NoAnswerer, "nobody is attached")})
	if a := trip(t, p).GetApprovalAnswered(); a.GetChoice() != "deny" || a.GetErrorCode() != "APPROVAL_NO_ANSWERER" || !strings.Contains(a.GetError(), "nobody") || a.GetRequest().GetCallId() != "c1" {
		t.Fatalf("%v", a)
	}
}
