package agentloop_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// TestDecisionsAreRecordedBeforeWhatTheyLetThrough: the admission stage
// and the approval stage record every decision — whichever listener made
// it, with its policy and version — and the driver appends each record
// before what it let through: the admission before the turn, a call's
// approval before its result, a refusal's record before message/refused.
func TestDecisionsAreRecordedBeforeWhatTheyLetThrough(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{Text: "working", ToolCalls: []scripted.Call{{Name: "clock", Arguments: `{}`}, {Name: "rm", Arguments: `{"path": "x"}`}}},
		{Text: "done"},
	}, agentloop.Config{})
	ctrl, err := e.root.Plugin(agentcontroller.Plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	c, _ := agentcontroller.Key.Get(e.root)
	ok := func(stdctx.Context, tools.Call) (tools.Result, error) { return tools.Result{Content: "ok"}, nil }
	e.tool("clock", ok)
	e.tool("rm", ok)
	// Two plain listeners decide; neither records anything itself.
	var judged tools.Call // the rm call as the approval stage saw it
	if _, err := tools.EventApprove.On(e.root, func(ctx stdctx.Context, a tools.Approval, next tools.ApproveNext) (tools.Verdict, error) {
		if a.Call.Name == "rm" {
			judged = a.Call
			return tools.Verdict{Decision: tools.Deny, Reason: "no deleting", Source: "test-policy", PolicyVersion: "v7"}, nil
		}
		return next.Call(ctx, a)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Message.Content == "bad" {
			d := agentcontroller.Reject("test/bad", "not that", false)
			d.Policy, d.PolicyVersion = "test-admission", "v2"
			return d, nil
		}
		return next.Call(ctx, a)
	}); err != nil {
		t.Fatal(err)
	}
	h := e.create("main")
	alice := agentcontroller.Source{Kind: agentcontroller.SourceUser, Entry: "cli", Principal: agentcontroller.Principal{Kind: "user", ID: "alice"}}
	if _, err := c.Deliver(stdctx.Background(), h.Agent, agentcontroller.Request{Mode: agentcontroller.Followup, Source: alice, RequestID: "r1", Content: "go"}); err != nil {
		t.Fatal(err)
	}
	idle(t, h.Agent)
	if _, err := c.Deliver(stdctx.Background(), h.Agent, agentcontroller.Request{Mode: agentcontroller.Followup, Source: alice, RequestID: "r2", Content: "bad"}); err == nil {
		t.Fatal("bad was admitted")
	}
	idle(t, h.Agent)

	var got []string
	var records []session.Decision
	var user llm.Message
	for _, ev := range h.Agent.Session().Events(1) {
		item := string(ev.Type)
		switch ev.Type {
		case session.DecisionRecorded:
			d := ev.Decision
			item = fmt.Sprintf("%s %s %s", d.Stage, d.Verdict, d.RequestID+d.Tool)
			records = append(records, *d)
		case session.ToolCall:
			item += " " + ev.ToolCall.Name
		case session.UserMessage:
			user = *ev.Message
		}
		got = append(got, item)
	}
	want := []string{
		"admission admit r1", "turn/start", "user/message", "step/start", "assistant/message",
		"tool/call clock", "approval allow clock", "tool/result",
		"tool/call rm", "approval deny rm", "tool/result",
		"step/end", "step/start", "assistant/message", "step/end", "turn/end",
		"admission refuse r2", "message/refused",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log\n got: %s\nwant: %s", strings.Join(got, " | "), strings.Join(want, " | "))
	}

	admit, deny, refuse := records[0], records[2], records[3]
	if src := admit.Source; src == nil || src.Principal == nil || src.Principal.ID != "alice" || src.Entry != "cli" || src.Kind != "user" {
		t.Fatalf("admission record's source %+v", admit.Source)
	}
	if admit.MessageID != user.ID || admit.Inputs != agentcontroller.AdmissionInputs("main", agentcontroller.Followup, user, alice) {
		t.Fatalf("admission record %+v for message %+v", admit, user)
	}
	bob := alice
	bob.Principal.ID = "bob"
	if admit.Inputs == agentcontroller.AdmissionInputs("main", agentcontroller.Followup, user, bob) {
		t.Fatal("the inputs digest does not cover the principal")
	}
	if deny.Policy != "test-policy" || deny.PolicyVersion != "v7" || deny.Reason != "no deleting" ||
		deny.Inputs != tools.CallInputs(judged) {
		t.Fatalf("approval record %+v", deny)
	}
	other := judged
	other.Arguments = json.RawMessage(`{"path": "y"}`)
	if tools.CallInputs(other) == deny.Inputs {
		t.Fatal("the inputs digest does not cover the arguments")
	}
	if refuse.Policy != "test-admission" || refuse.PolicyVersion != "v2" || refuse.Reason != "test/bad" {
		t.Fatalf("refusal record %+v", refuse)
	}
	if v, err := session.VerifyDecisions(h.Agent.Session().ID(), h.Agent.Session().Events(1), nil); err != nil || v.Records != 4 {
		t.Fatalf("the live chain: %+v %v", v, err)
	}
}

// TestRefusalDuringATurnIsRecordedAtItsEnd: the agent controller hands
// a refusal to the driver through RecordEvent, like a plugin's event, but
// an outcome of a message that never entered the inbox is no event of the
// step it happened in: it lands after the running turn's end, as an event
// of that turn and step 0, while the refusal's decision record goes in
// before the next tool result, as every record does.
func TestRefusalDuringATurnIsRecordedAtItsEnd(t *testing.T) {
	e := newEnv(t, []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "hold", Arguments: `{}`}}},
		{Text: "done"},
	}, agentloop.Config{})
	ctrl, err := e.root.Plugin(agentcontroller.Plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	c, _ := agentcontroller.Key.Get(e.root)
	running, release := make(chan struct{}), make(chan struct{})
	e.tool("hold", func(stdctx.Context, tools.Call) (tools.Result, error) {
		close(running)
		<-release
		return tools.Result{Content: "held"}, nil
	})
	if _, err := agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Message.Content == "bad" {
			return agentcontroller.Reject("test/bad", "not that", false), nil
		}
		return next.Call(ctx, a)
	}); err != nil {
		t.Fatal(err)
	}
	h := e.create("main")
	alice := agentcontroller.Source{Kind: agentcontroller.SourceUser, Entry: "cli", Principal: agentcontroller.Principal{Kind: "user", ID: "alice"}}
	if _, err := c.Deliver(stdctx.Background(), h.Agent, agentcontroller.Request{Mode: agentcontroller.Followup, Source: alice, RequestID: "r1", Content: "go"}); err != nil {
		t.Fatal(err)
	}
	<-running
	if _, err := c.Deliver(stdctx.Background(), h.Agent, agentcontroller.Request{Mode: agentcontroller.Steer, Source: alice, RequestID: "r2", Content: "bad"}); err == nil {
		t.Fatal("bad was admitted")
	}
	close(release)
	idle(t, h.Agent)

	var got []string
	var refused session.Event
	for _, ev := range h.Agent.Session().Events(1) {
		item := string(ev.Type)
		switch ev.Type {
		case session.DecisionRecorded:
			item = fmt.Sprintf("%s %s %s %d.%d", ev.Decision.Stage, ev.Decision.Verdict, ev.Decision.RequestID+ev.Decision.Tool, ev.Turn, ev.Step)
		case session.MessageRefused:
			refused = ev
		}
		got = append(got, item)
	}
	want := []string{
		"admission admit r1 0.0", "turn/start", "user/message", "step/start", "assistant/message",
		"tool/call", "approval allow hold 1.1", "admission refuse r2 1.1", "tool/result",
		"step/end", "step/start", "assistant/message", "step/end", "turn/end",
		"message/refused",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log\n got: %s\nwant: %s", strings.Join(got, " | "), strings.Join(want, " | "))
	}
	if refused.Turn != 1 || refused.Step != 0 || refused.RequestID != "r2" || refused.Reason != "test/bad" {
		t.Fatalf("message/refused at %d.%d: %+v", refused.Turn, refused.Step, refused)
	}
}
