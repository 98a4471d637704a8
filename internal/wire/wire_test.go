package wire_test

import (
	"reflect"
	"testing"

	"github.com/dsh-go/dsh/internal/wire"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/tools"
	"google.golang.org/protobuf/proto"
)

// agent stands for a live agent: only its id travels.
type agent struct {
	agents.Agent
	id string
}

func (a agent) ID() string { return a.id }

var main = agent{id: "main"}

// trip sends m through its bytes, as gRPC does.
func trip[M proto.Message](t *testing.T, m M) M {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(M)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func full() llm.Message {
	return llm.Message{ID: "m1", Role: llm.RoleAssistant, Content: "hi", Reasoning: "think", ReasoningSignature: "sig",
		ToolCalls: []llm.ToolCall{{ID: "c1", Name: "clock", Arguments: `{"tz":"UTC"}`}}, ToolCallID: "t1", IsError: true, RequestID: "r1"}
}

func same(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s changed on the way:\n\tgot  %#v\n\twant %#v", what, got, want)
	}
}

func TestWaterfallsRoundTrip(t *testing.T) {
	adm := agentcontroller.Admission{Agent: main, Message: full(), Mode: agentcontroller.Steer,
		Source: agentcontroller.Source{Kind: agentcontroller.SourceUser, RPCID: "cli", Unattended: true, Entry: "serve",
			Principal: agentcontroller.Principal{Kind: "jwt", ID: "carol", Tenant: "acme"}, OnBehalfOf: &agentcontroller.Principal{Kind: "user", ID: "dan"}}}
	back, err := wire.ApplyAdmission(adm, trip(t, wire.Admission(adm)))
	same(t, "admission", back, adm)
	if err != nil {
		t.Fatal(err)
	}
	refused := agentcontroller.Reject("policy/x", "no", true)
	refused.Policy, refused.PolicyVersion = "policy.cel", "sha256:0123"
	for _, d := range []agentcontroller.Decision{agentcontroller.Admit(), agentcontroller.Reject("x/y", "no", true), refused} {
		got, err := wire.DecisionFrom(adm, trip(t, wire.Decision(d)))
		if err != nil || got.Kind != d.Kind || got.Reason != d.Reason || got.Message != d.Message || got.Presented != d.Presented ||
			got.Policy != d.Policy || got.PolicyVersion != d.PolicyVersion {
			t.Errorf("decision %+v came back as %+v (%v)", d, got, err)
		}
	}

	x := tools.Execution{Call: tools.Call{AgentID: "main", ID: "c1", Name: "clock", Arguments: []byte(`not json`)}}
	w := trip(t, wire.Execution(x))
	if w.GetToolExecution().GetKnown() || w.GetToolExecution().GetAgentId() != "main" {
		t.Errorf("execution: %v", w)
	}
	w.GetToolExecution().Call.Arguments = `{"tz":"UTC"}`
	gotX, _ := wire.ApplyExecution(x, w)
	if string(gotX.Call.Arguments) != `{"tz":"UTC"}` || gotX.Call.Name != "clock" {
		t.Errorf("execution arguments: %+v", gotX.Call)
	}
	res := tools.Result{Content: "boom", IsError: true}
	gotR, _ := wire.ToolResultFrom(x, trip(t, wire.ToolResult(res)))
	same(t, "tool result", gotR, res)

	temp := 0.5
	req := llm.Request{AgentID: "main", Provider: "p", Model: "m", System: "s", History: llm.NewHistory(full(), llm.Message{Role: llm.RoleUser, Content: "q"}),
		Tools: []llm.ToolSpec{{Name: "clock", Description: "d", Parameters: []byte(`{"type":"object"}`)}}, MaxTokens: 99, Temperature: &temp}
	ev := agentloop.RequestEvent{Agent: main, Turn: 2, Step: 3, Request: req}
	gotE, _ := wire.ApplyRequest(agentloop.RequestEvent{Agent: main, Turn: 2, Step: 3, Request: llm.Request{AgentID: "main"}}, trip(t, wire.Request(ev)))
	same(t, "request history", gotE.Request.History.Messages(), req.History.Messages())
	gotE.Request.History, req.History = llm.History{}, llm.History{}
	same(t, "request", gotE.Request, req)
	noTemp, _ := wire.RequestResultFrom(ev, trip(t, wire.RequestResult(llm.Request{Model: "m"})))
	if noTemp.Temperature != nil || noTemp.AgentID != "main" {
		t.Errorf("an unset temperature must stay unset, the agent kept: %+v", noTemp)
	}

	sr := agentloop.StepResult{Agent: main, Turn: 1, Step: 2, Message: full(), Usage: llm.Usage{InputTokens: 1, OutputTokens: 2, ReasoningTokens: 3, CacheHitTokens: 4, CacheMissTokens: 5}, Finish: llm.FinishReason("tool-calls")}
	gotS, _ := wire.ApplyStepResult(agentloop.StepResult{Agent: main, Turn: 1, Step: 2}, trip(t, wire.StepResult(sr)))
	same(t, "step result", gotS, sr)
	gotS, _ = wire.StepResultFrom(agentloop.StepResult{Agent: main, Turn: 1, Step: 2}, trip(t, wire.StepResultResult(sr)))
	same(t, "step result (result)", gotS, sr)

	c := agentloop.Continuation{Agent: main, Turn: 1, Step: 2, ToolCalls: 3, Steering: 4, Finish: llm.FinishReason("stop")}
	gotC, _ := wire.ApplyContinuation(agentloop.Continuation{Agent: main, Turn: 1, Step: 2}, trip(t, wire.Continuation(c)))
	same(t, "continuation", gotC, c)
	for _, goOn := range []bool{true, false} {
		if got, err := wire.ContinueFrom(c, trip(t, wire.Continue(goOn))); err != nil || got != goOn {
			t.Errorf("continue %v came back as %v (%v)", goOn, got, err)
		}
	}
}

func TestAReplacementForAnotherEventIsAnError(t *testing.T) {
	other := &pluginv1.Payload{Event: &pluginv1.Payload_Status{Status: &pluginv1.StatusChange{}}}
	if _, err := wire.ApplyAdmission(agentcontroller.Admission{Agent: main}, other); err == nil {
		t.Error("an admission replaced by another event's payload must fail")
	}
	if _, err := wire.ContinueFrom(agentloop.Continuation{}, &pluginv1.Result{}); err == nil {
		t.Error("a continuation answered without continue_turn must fail, not end the turn")
	}
}

func TestNotificationsCarryEveryField(t *testing.T) {
	scope, p := wire.Status(agents.StatusChange{Agent: main, From: agents.StatusIdle, To: agents.StatusRunning})
	if s := trip(t, p).GetStatus(); scope != "main" || s.GetFrom() != "idle" || s.GetTo() != "running" || s.GetAgentId() != "main" {
		t.Errorf("status: %s %v", scope, s)
	}
	u := llm.Usage{OutputTokens: 7}
	_, p = wire.StreamChunk(agentloop.StreamChunk{Agent: main, Turn: 1, Step: 2, MessageID: "m1",
		Chunk: llm.Chunk{Kind: llm.ChunkToolCall, ToolCall: &llm.ToolCallDelta{Index: 1, ID: "c1", Name: "clock", Arguments: "{"}, Usage: &u}})
	ch := trip(t, p).GetStreamChunk()
	if ch.GetChunk().GetKind() != "tool-call" || ch.GetChunk().GetToolCall().GetIndex() != 1 || ch.GetChunk().GetToolCall().GetArguments() != "{" ||
		ch.GetChunk().GetUsage().GetOutputTokens() != 7 || ch.GetMessageId() != "m1" {
		t.Errorf("stream chunk: %v", ch)
	}
	_, p = wire.Inserted(agentcontroller.Inserted{Agent: main, Message: full(), Mode: agentcontroller.Followup})
	if in := trip(t, p).GetInboxInserted(); in.GetMode() != "followup" || in.GetMessage().GetReasoningSignature() != "sig" {
		t.Errorf("inserted: %v", in)
	}
}

// A plugin passing a forged sender to next changes nothing of the
// provenance the listeners after it see; the content and mode it changes
// go on.
func TestAnAdmissionPassedOnKeepsItsProvenance(t *testing.T) {
	alice := agentcontroller.Principal{Kind: "token", ID: "alice", Tenant: "acme"}
	from := agentcontroller.Source{Kind: agentcontroller.SourceWebhook, RPCID: "hook", Unattended: true, Entry: "webhook",
		Principal: agentcontroller.Principal{Kind: "webhook", ID: "ci"}, OnBehalfOf: &alice}
	prov := from.Provenance()
	adm := agentcontroller.Admission{Agent: main, Mode: agentcontroller.Followup, Source: from,
		Message: llm.Message{ID: "m1", Role: llm.RoleUser, Content: "deploy", RequestID: "r1", Unattended: true, From: &prov}}
	w := trip(t, wire.Admission(adm))
	a := w.GetAdmission()
	a.Source = &pluginv1.Source{Kind: "user", Entry: "cli", Principal: &pluginv1.Principal{Kind: "token", Id: "root", Tenant: "ops"}}
	a.Message.Id, a.Message.Role, a.Message.RequestId, a.Message.Content = "m2", "assistant", "r2", "[redacted]"
	a.Mode = string(agentcontroller.Steer)
	back, err := wire.ApplyAdmission(adm, w)
	if err != nil {
		t.Fatal(err)
	}
	same(t, "source", back.Source, from)
	if m := back.Message; m.ID != "m1" || m.Role != llm.RoleUser || m.RequestID != "r1" || !m.Unattended || m.From != &prov {
		t.Errorf("the message's identity changed: %+v", m)
	}
	if back.Message.Content != "[redacted]" || back.Mode != agentcontroller.Steer {
		t.Errorf("the plugin's changes were lost: %q %q", back.Message.Content, back.Mode)
	}
}
