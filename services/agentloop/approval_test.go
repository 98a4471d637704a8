package agentloop_test

import (
	stdctx "context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
)

// askingTool registers a tool whose every call goes to the agent's
// answerer, and returns how many times it actually ran.
func (e *env) askingTool(name string) *int {
	e.t.Helper()
	ran := new(int)
	err := e.tools.Register(e.root, tools.Tool{Name: name, Description: "asks first", Approval: tools.Ask,
		Execute: func(stdctx.Context, tools.Call) (tools.Result, error) {
			*ran++
			return tools.Result{Content: "done"}, nil
		}})
	if err != nil {
		e.t.Fatal(err)
	}
	return ran
}

// TestPendingApprovalHoldsTheQueueAndCancelEndsIt: while a person is being
// asked, a message queued behind the turn waits (it does not start a turn
// of its own or slip into this one), and a cancel withdraws the question,
// never runs the tool, answers the call and ends the turn aborted.
func TestPendingApprovalHoldsTheQueueAndCancelEndsIt(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{Text: "asking", ToolCalls: []scripted.Call{{Name: "deploy"}}},
		{Text: "next turn"},
	}, agentloop.Config{})
	ran := e.askingTool("deploy")
	svc, err := approval.Key.Get(e.root)
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan approval.Request, 1)
	withdrawn := make(chan struct{})
	detach, err := svc.Attach("a", func(ctx stdctx.Context, req approval.Request) (approval.Answer, error) {
		asked <- req
		<-ctx.Done()
		close(withdrawn)
		return approval.Answer{}, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()

	a := e.create("a").Agent
	if err := a.Followup(user("deploy it")); err != nil {
		t.Fatal(err)
	}
	select {
	case req := <-asked:
		if req.Tool != "deploy" || req.AgentID != "a" {
			t.Fatalf("asked %+v", req)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the person was never asked")
	}

	if err := a.Followup(user("and then this")); err != nil {
		t.Fatal(err)
	}
	if got := a.Pending(); got != 1 {
		t.Fatalf("the queued message must wait while the question is open; pending = %d", got)
	}
	if tr := strings.Join(trace(a.Session()), " "); strings.Contains(tr, "and then this") {
		t.Fatalf("the queued message jumped ahead of the pending approval: %s", tr)
	}

	a.Cancel(nil)
	select {
	case <-withdrawn:
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not withdraw the pending question")
	}
	idle(t, a)
	if *ran != 0 {
		t.Fatalf("the tool ran %d times after its approval was cancelled", *ran)
	}
	if got := turnEnds(a.Session()); len(got) != 1 || got[0] != agentloop.ReasonAborted {
		t.Fatalf("turn ends %v; want one, aborted (cancel drops what was queued)", got)
	}
	assertEachCallAnsweredOnce(t, a.Session())
}

// TestAnUnattendedTurnNeverAsks: a turn begun by a message from a source no
// person watches (a webhook, a schedule) refuses what a policy would ask,
// even with someone attached to answer, and the tool never runs.
func TestAnUnattendedTurnNeverAsks(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "deploy"}}},
		{Text: "could not deploy"},
	}, agentloop.Config{})
	ran := e.askingTool("deploy")
	svc, err := approval.Key.Get(e.root)
	if err != nil {
		t.Fatal(err)
	}
	asked := 0
	detach, err := svc.Attach("a", func(stdctx.Context, approval.Request) (approval.Answer, error) {
		asked++
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	a := e.create("a").Agent
	if err := a.Followup(llm.Message{Role: llm.RoleUser, Content: "deploy it", Unattended: true}); err != nil {
		t.Fatal(err)
	}
	idle(t, a)
	if asked != 0 || *ran != 0 {
		t.Fatalf("an unattended turn asked %d times and ran the tool %d times", asked, *ran)
	}
	res := results(a.Session())
	if len(res) != 1 || !res[0].IsError || !strings.Contains(res[0].Content, "unattended source") {
		t.Fatalf("results %+v", res)
	}
}
