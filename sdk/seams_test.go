package sdk_test

import (
	stdctx "context"
	"errors"
	"slices"
	"testing"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"google.golang.org/protobuf/proto"
)

func TestApprovalDecidesAndRewrites(t *testing.T) {
	p := sdk.New("policy", "1.0.0")
	p.Approval(func(ctx stdctx.Context, a *sdk.Approval, next sdk.ApprovalNext) (*sdk.Verdict, error) {
		switch a.Call.Name {
		case "rm":
			return sdk.DenyCall("no deleting"), nil
		case "push":
			return sdk.Ask("pushes are public"), nil
		case "read":
			return sdk.Allow(), nil
		case "clock":
			a.Call.Arguments = `{"timezone":"UTC"}`
		}
		return next(ctx, a)
	})
	c := serve(t, p)
	call := func(name, args string) *pluginv1.Payload {
		return &pluginv1.Payload{Event: &pluginv1.Payload_Approval{Approval: &sdk.Approval{
			AgentId: "main", Call: &sdk.ToolCall{Id: "call_1", Name: name, Arguments: args}, ToolDefault: "allow"}}}
	}
	def := &pluginv1.Result{Event: &pluginv1.Result_Verdict{Verdict: sdk.Allow()}}
	var passed *pluginv1.Payload
	rest := func(r *pluginv1.Payload) (*pluginv1.Result, *pluginv1.Error) {
		passed = r
		return def, nil
	}
	for name, want := range map[string]*sdk.Verdict{"rm": sdk.DenyCall("no deleting"), "push": sdk.Ask("pushes are public"), "read": sdk.Allow()} {
		res, nexts := hostCall(t, c, sdk.ApprovalEvent, call(name, "{}"), rest)
		if nexts != 0 || !proto.Equal(res.Result.GetVerdict(), want) {
			t.Errorf("%s: %v after %d nexts, want %v", name, res.Result, nexts, want)
		}
	}
	res, nexts := hostCall(t, c, sdk.ApprovalEvent, call("clock", `{"timezone":"Mars"}`), rest)
	if nexts != 1 || passed.GetApproval().GetCall().GetArguments() != `{"timezone":"UTC"}` || !proto.Equal(res.Result, def) {
		t.Fatalf("rewrite: next got %v, result %v", passed, res.Result)
	}
	passed = call("untouched", "")
	hostCall(t, c, sdk.ApprovalEvent, call("search", `{}`), rest)
	if passed != nil {
		t.Fatalf("unchanged arguments must pass no payload, passed %v", passed)
	}
}

// TestEmitBatchDeliversInOrderAndReportsFailuresByIndex: each notification
// reaches its listener in the batch's order; those that fail (a listener's
// error, an event nobody listens to) are reported by index, and the rest
// still run.
func TestEmitBatchDeliversInOrderAndReportsFailuresByIndex(t *testing.T) {
	p := sdk.New("listener", "1.0.0")
	var heard []string
	p.OnStreamChunk(func(_ stdctx.Context, c *sdk.StreamChunk) error {
		heard = append(heard, c.GetChunk().GetText())
		if c.GetChunk().GetText() == "bad" {
			return errors.New("cannot take it")
		}
		return nil
	})
	p.OnStatus(func(_ stdctx.Context, s *sdk.StatusChange) error {
		heard = append(heard, "status:"+s.GetTo())
		return nil
	})
	c := serve(t, p)
	chunk := func(text string) *pluginv1.EmitRequest {
		return &pluginv1.EmitRequest{Event: sdk.StreamChunkEvent, ScopeTag: "main", Payload: &pluginv1.Payload{Event: &pluginv1.Payload_StreamChunk{
			StreamChunk: &sdk.StreamChunk{AgentId: "main", Chunk: &pluginv1.Chunk{Kind: "text", Text: text}}}}}
	}
	status := &pluginv1.EmitRequest{Event: sdk.StatusEvent, Payload: &pluginv1.Payload{Event: &pluginv1.Payload_Status{Status: &sdk.StatusChange{To: "idle"}}}}
	unknown := &pluginv1.EmitRequest{Event: "session/outcome"}
	res, err := c.EmitBatch(stdctx.Background(), &pluginv1.EmitBatchRequest{Emits: []*pluginv1.EmitRequest{
		chunk("a"), chunk("bad"), unknown, chunk("b"), status}})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "bad", "b", "status:idle"}; !slices.Equal(heard, want) {
		t.Fatalf("heard %v, want %v", heard, want)
	}
	var failed []uint32
	for _, f := range res.Failures {
		failed = append(failed, f.Index)
	}
	if !slices.Equal(failed, []uint32{1, 2}) || res.Failures[0].Error.GetMessage() == "" {
		t.Fatalf("failures %v", res.Failures)
	}
}

// TestDescribeNegotiates: the plugin accepts emit-batch and mux, says what it
// requires, and keeps what the host offers.
func TestDescribeNegotiates(t *testing.T) {
	p := sdk.New("picky", "1.0.0")
	p.Require("session/outcome")
	c := serve(t, p)
	d, err := c.Describe(stdctx.Background(), &pluginv1.DescribeRequest{ProtocolVersion: sdk.ProtocolVersion, Capabilities: []string{"tools", "emit-batch"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Accepts, []string{sdk.EmitBatch, sdk.Mux}) || !slices.Equal(d.Requires, []string{"session/outcome"}) {
		t.Fatalf("accepts %v, requires %v", d.Accepts, d.Requires)
	}
	if got := p.HostCapabilities(); !slices.Equal(got, []string{"tools", "emit-batch"}) {
		t.Fatalf("host capabilities %v", got)
	}
}

// TestATypedListenerRefusesAPayloadOfAnotherEvent: a payload without the
// listener's field is a protocol mismatch, said so.
func TestATypedListenerRefusesAPayloadOfAnotherEvent(t *testing.T) {
	p := sdk.New("listener", "1.0.0")
	p.OnSessionOutcome(func(stdctx.Context, *sdk.SessionOutcome) error { return nil })
	c := serve(t, p)
	res, err := c.Emit(stdctx.Background(), &pluginv1.EmitRequest{Event: sdk.SessionOutcomeEvent, Payload: &pluginv1.Payload{}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Error.GetReason() != "sdk/payload-mismatch" {
		t.Fatalf("got %v", res.Error)
	}
}
