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
	"github.com/dsh-go/dsh/services/agents"
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

// TestRefusalDuringATurnIsDurableBeforeItsSenderHears: the agent
// controller hands a refusal to the agent through RecordEvent while a
// turn runs; the outcome writer appends it, after its decision record, as
// events of that turn and step 0 while the driver waits on the tool, and
// checkpoints it before the sender is answered — a crash during the rest
// of the turn does not take the answer back. The approval record of the
// held call still goes in before its result.
func TestRefusalDuringATurnIsDurableBeforeItsSenderHears(t *testing.T) {
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
	// Answered while the tool still holds the turn: the refusal is stored.
	if ev, ok := h.Agent.Session().Outcome("r2"); !ok || ev.Type != session.MessageRefused || ev.Seq > h.Agent.Session().Durable() {
		t.Fatalf("the refusal when its sender was answered: %+v %v, durable up to %d", ev, ok, h.Agent.Session().Durable())
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
		"tool/call", "admission refuse r2 1.0", "message/refused", "approval allow hold 1.1", "tool/result",
		"step/end", "step/start", "assistant/message", "step/end", "turn/end",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log\n got: %s\nwant: %s", strings.Join(got, " | "), strings.Join(want, " | "))
	}
	if refused.Turn != 1 || refused.Step != 0 || refused.RequestID != "r2" || refused.Reason != "test/bad" {
		t.Fatalf("message/refused at %d.%d: %+v", refused.Turn, refused.Step, refused)
	}
}

// TestRefusalWhileTheModelAnswersIsDurableBeforeItsSenderHears: a
// refusal or an expiry handed over while the driver waits on the model's
// stream is
// written and checkpointed then, between the step's start and its
// answer, not after the step: its sender does not wait for the model.
func TestRefusalWhileTheModelAnswersIsDurableBeforeItsSenderHears(t *testing.T) {
	e := newEnv(t, nil, agentloop.Config{})
	ctrl, err := e.root.Plugin(agentcontroller.Plugin, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ctrl.Await(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	c, _ := agentcontroller.Key.Get(e.root)
	streaming, release := make(chan struct{}), make(chan struct{})
	e.registerProvider("slow", providerFunc(func(ctx stdctx.Context, _ llm.Request) (llm.Stream, error) {
		close(streaming)
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &sliceStream{chunks: []llm.Chunk{{Kind: llm.ChunkText, Text: "ok"}, {Kind: llm.ChunkFinish, Finish: llm.FinishStop}}}, nil
	}))
	if _, err := agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		switch a.Message.Content {
		case "bad":
			return agentcontroller.Reject("test/bad", "not that", false), nil
		case "late":
			return agentcontroller.Expire("test/late", "waited too long", false), nil
		}
		return next.Call(ctx, a)
	}); err != nil {
		t.Fatal(err)
	}
	h, err := e.registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: "main", Options: agents.Options{Provider: "slow"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(stdctx.Background())
	if _, err := c.Deliver(stdctx.Background(), h.Agent, agentcontroller.Request{Mode: agentcontroller.Followup, RequestID: "r1", Content: "go"}); err != nil {
		t.Fatal(err)
	}
	<-streaming
	for _, d := range []struct {
		mode          agentcontroller.Mode
		content, fate string
	}{{agentcontroller.Steer, "bad", agentcontroller.OutcomeRefused}, {agentcontroller.Followup, "bad", agentcontroller.OutcomeRefused}, {agentcontroller.Followup, "late", agentcontroller.OutcomeExpired}} {
		rid := "r-" + string(d.mode) + "-" + d.content
		if _, err := c.Deliver(stdctx.Background(), h.Agent, agentcontroller.Request{Mode: d.mode, RequestID: rid, Content: d.content}); agentcontroller.OutcomeOf(err) != d.fate {
			t.Fatalf("%s as %s: %v", d.content, d.mode, err)
		}
		log := h.Agent.Session()
		if ev, ok := log.Outcome(rid); !ok || ev.Seq > log.Durable() || ev.Turn != 1 || ev.Step != 0 {
			t.Fatalf("the refusal of %s when its sender was answered: %+v %v, durable up to %d", rid, ev, ok, log.Durable())
		}
	}
	close(release)
	idle(t, h.Agent)
	var got []string
	for _, ev := range h.Agent.Session().Events(1) {
		item := string(ev.Type)
		if ev.Type == session.DecisionRecorded {
			item = fmt.Sprintf("%s %s %s", ev.Decision.Stage, ev.Decision.Verdict, ev.Decision.RequestID)
		}
		got = append(got, item)
	}
	want := []string{
		"admission admit r1", "turn/start", "user/message", "step/start",
		"admission refuse r-steer-bad", "message/refused", "admission refuse r-followup-bad", "message/refused",
		"admission expire r-followup-late", "message/expired",
		"assistant/message", "step/end", "turn/end",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("log\n got: %s\nwant: %s", strings.Join(got, " | "), strings.Join(want, " | "))
	}
}
