package sdk_test

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
)

// serve runs p's protocol server in memory and returns a client that
// plays the host.
func serve(t *testing.T, p *sdk.Plugin) pluginv1.PluginClient {
	t.Helper()
	return serveServer(t, p.Server())
}

// serveServer is serve for a protocol server of any make.
func serveServer(t *testing.T, s pluginv1.PluginServer) pluginv1.PluginClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	pluginv1.RegisterPluginServer(srv, s)
	go srv.Serve(lis)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx stdctx.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Stop()
	})
	return pluginv1.NewPluginClient(conn)
}

// hostCall runs one waterfall call the way the host does. rest stands for
// the rest of the host's chain: it gets the payload next passes on (nil:
// unchanged) and returns the chain's result. It reports what the plugin
// answered and the payloads rest saw.
func hostCall(t *testing.T, c pluginv1.PluginClient, event string, payload *pluginv1.Payload, rest func(replaced *pluginv1.Payload) (*pluginv1.Result, *pluginv1.Error)) (*pluginv1.CallResult, int) {
	t.Helper()
	stream, err := c.Call(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.CloseSend()
	if err := stream.Send(&pluginv1.HostMessage{Msg: &pluginv1.HostMessage_Start{Start: &pluginv1.CallStart{Event: event, Payload: payload, ScopeTag: "main"}}}); err != nil {
		t.Fatal(err)
	}
	nexts := 0
	for {
		in, err := stream.Recv()
		if err != nil {
			t.Fatalf("the plugin ended the call without a result: %v", err)
		}
		switch m := in.Msg.(type) {
		case *pluginv1.PluginMessage_Result:
			return m.Result, nexts
		case *pluginv1.PluginMessage_Next:
			nexts++
			out, e := rest(m.Next.Payload)
			if err := stream.Send(&pluginv1.HostMessage{Msg: &pluginv1.HostMessage_NextResult{NextResult: &pluginv1.NextResult{Result: out, Error: e}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAdmissionAdmitsReplacesAndRefuses(t *testing.T) {
	p := sdk.New("guard", "1.0.0")
	p.Admission(func(ctx stdctx.Context, a *sdk.Admission, next sdk.AdmissionNext) (*sdk.Decision, error) {
		switch {
		case strings.Contains(a.Message.Content, "spam"):
			return sdk.Reject("guard/spam", "no spam", false), nil
		case strings.Contains(a.Message.Content, "secret"):
			a.Message.Content = "[redacted]"
		}
		return next(ctx, a)
	})
	c := serve(t, p)
	admitted := &pluginv1.Result{Event: &pluginv1.Result_Decision{Decision: sdk.Admit()}}
	admit := func(*pluginv1.Payload) (*pluginv1.Result, *pluginv1.Error) { return admitted, nil }
	payload := func(text string) *pluginv1.Payload {
		return &pluginv1.Payload{Event: &pluginv1.Payload_Admission{Admission: &sdk.Admission{
			AgentId: "main", Message: &sdk.Message{Role: "user", Content: text}, Mode: "followup", Source: &sdk.Source{Kind: "user"}}}}
	}

	var passed *pluginv1.Payload
	res, nexts := hostCall(t, c, sdk.AdmissionEvent, payload("hello"), func(r *pluginv1.Payload) (*pluginv1.Result, *pluginv1.Error) {
		passed = r
		return admit(r)
	})
	if !proto.Equal(res.Result, admitted) || nexts != 1 || passed != nil {
		t.Fatalf("admit: result %v after %d nexts, payload passed %v (an unchanged admission must pass none)", res.Result, nexts, passed)
	}

	hostCall(t, c, sdk.AdmissionEvent, payload("my secret"), func(r *pluginv1.Payload) (*pluginv1.Result, *pluginv1.Error) {
		passed = r
		return admit(r)
	})
	if got := passed.GetAdmission(); got.GetMessage().GetContent() != "[redacted]" || got.GetAgentId() != "main" {
		t.Fatalf("replace: next got %v", passed)
	}

	res, nexts = hostCall(t, c, sdk.AdmissionEvent, payload("buy spam"), admit)
	if nexts != 0 || !proto.Equal(res.Result.GetDecision(), sdk.Reject("guard/spam", "no spam", false)) {
		t.Fatalf("refuse: %v after %d nexts", res.Result, nexts)
	}

	// A refusal further down the chain comes back as next's error, code
	// and reason intact.
	res, _ = hostCall(t, c, sdk.AdmissionEvent, payload("hi"), func(*pluginv1.Payload) (*pluginv1.Result, *pluginv1.Error) {
		return nil, &pluginv1.Error{Code: "AGENT_ADMISSION_REJECTED", Reason: "admission/rate-limited", Message: "slow down"}
	})
	if err := sdk.ErrorFromProto(res.Error); !errs.Has(err, "AGENT_ADMISSION_REJECTED", "admission/rate-limited") {
		t.Fatalf("the chain's error did not come back intact: %v", err)
	}
}

func TestToolExecuteDeniesAndRewritesArguments(t *testing.T) {
	p := sdk.New("tools-guard", "1.0.0")
	p.ToolExecute(func(ctx stdctx.Context, x *sdk.ToolExecution, next sdk.ToolNext) (*sdk.ToolResult, error) {
		if x.Call.Name == "shell" {
			return sdk.Deny("shell is not allowed here"), nil
		}
		if x.Call.Name == "clock" {
			x.Call.Arguments = `{"timezone":"UTC"}`
		}
		return next(ctx, x)
	})
	c := serve(t, p)
	call := func(name, args string) *pluginv1.Payload {
		return &pluginv1.Payload{Event: &pluginv1.Payload_ToolExecution{ToolExecution: &sdk.ToolExecution{
			AgentId: "main", Call: &sdk.ToolCall{Id: "call_1", Name: name, Arguments: args}, Known: true}}}
	}
	ran := &pluginv1.Result{Event: &pluginv1.Result_ToolResult{ToolResult: &sdk.ToolResult{Content: "ran"}}}
	var passed *pluginv1.Payload
	tool := func(r *pluginv1.Payload) (*pluginv1.Result, *pluginv1.Error) {
		passed = r
		return ran, nil
	}

	res, nexts := hostCall(t, c, sdk.ToolEvent, call("shell", `{"cmd":"rm -rf /"}`), tool)
	if nexts != 0 || !proto.Equal(res.Result.GetToolResult(), sdk.Deny("shell is not allowed here")) {
		t.Fatalf("deny: %v after %d nexts", res.Result, nexts)
	}

	res, _ = hostCall(t, c, sdk.ToolEvent, call("clock", `{"timezone":"Europe/Paris"}`), tool)
	if passed.GetToolExecution().GetCall().GetArguments() != `{"timezone":"UTC"}` || !proto.Equal(res.Result, ran) {
		t.Fatalf("rewrite: next got %v, result %v", passed, res.Result)
	}

	passed = call("untouched", "")
	hostCall(t, c, sdk.ToolEvent, call("search", `{"q":"go"}`), tool)
	if passed != nil {
		t.Fatalf("unchanged arguments must pass no payload, passed %v", passed)
	}
}

func TestNextTwiceAndPanicsAreErrorsNotCrashes(t *testing.T) {
	p := sdk.New("clumsy", "1.0.0")
	p.Waterfall("agent/request", func(ctx stdctx.Context, call sdk.Call, next sdk.Next) (*pluginv1.Result, error) {
		if _, err := next(ctx, nil); err != nil {
			return nil, err
		}
		return next(ctx, nil)
	})
	p.Waterfall("agent/step-result", func(stdctx.Context, sdk.Call, sdk.Next) (*pluginv1.Result, error) {
		panic("oops")
	})
	c := serve(t, p)
	pass := func(*pluginv1.Payload) (*pluginv1.Result, *pluginv1.Error) { return &pluginv1.Result{}, nil }

	res, nexts := hostCall(t, c, "agent/request", &pluginv1.Payload{}, pass)
	if err := sdk.ErrorFromProto(res.Error); nexts != 1 || !errs.HasCode(err, errs.NextMisuse) {
		t.Fatalf("a second next must fail with %s without reaching the host; got %v after %d nexts", errs.NextMisuse, err, nexts)
	}
	res, _ = hostCall(t, c, "agent/step-result", &pluginv1.Payload{}, pass)
	if err := sdk.ErrorFromProto(res.Error); !errs.HasCode(err, errs.ListenerFailed) || !strings.Contains(err.Error(), "oops") {
		t.Fatalf("a panic must come back as %s; got %v", errs.ListenerFailed, err)
	}
	// The process still serves.
	if _, err := c.Describe(stdctx.Background(), &pluginv1.DescribeRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestDescribeAndConfigure(t *testing.T) {
	p := sdk.New("described", "2.3.4")
	p.Admission(func(ctx stdctx.Context, a *sdk.Admission, next sdk.AdmissionNext) (*sdk.Decision, error) {
		return next(ctx, a)
	}, sdk.Prepend())
	p.Emit("agent/status", func(stdctx.Context, sdk.Call) error { return nil })
	p.OnConfigure(func(raw json.RawMessage) error {
		var cfg struct{ Limit int }
		if err := json.Unmarshal(raw, &cfg); err != nil {
			return err
		}
		if cfg.Limit < 1 {
			return errs.New(errs.InvalidArgument, fmt.Sprintf("limit must be at least 1, got %d", cfg.Limit)).WithReason("described/limit")
		}
		return nil
	})
	c := serve(t, p)
	desc, err := c.Describe(stdctx.Background(), &pluginv1.DescribeRequest{ProtocolVersion: sdk.ProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	if desc.Name != "described" || desc.Version != "2.3.4" || len(desc.Listeners) != 2 ||
		desc.Listeners[0].Event != sdk.AdmissionEvent || !desc.Listeners[0].Prepend || desc.Listeners[0].Kind != pluginv1.Kind_KIND_WATERFALL ||
		desc.Listeners[1].Kind != pluginv1.Kind_KIND_EMIT {
		t.Fatalf("describe: %v", desc)
	}
	res, err := c.Configure(stdctx.Background(), &pluginv1.ConfigureRequest{ConfigJson: []byte(`{"limit":0}`)})
	if err != nil || !errs.Has(sdk.ErrorFromProto(res.Error), errs.InvalidArgument, "described/limit") {
		t.Fatalf("a rejected config must come back by code and reason: %v %v", res, err)
	}
	if res, err = c.Configure(stdctx.Background(), &pluginv1.ConfigureRequest{ConfigJson: []byte(`{"limit":3}`)}); err != nil || res.Error != nil {
		t.Fatalf("a good config: %v %v", res, err)
	}
}

func TestErrorsCrossTheBoundaryByCodeAndReason(t *testing.T) {
	inner := errs.New("AGENT_ADMISSION_REJECTED", "too long").WithReason("guard/too-long")
	inner.Details = map[string]any{"limit": float64(4000)}
	deep := errs.Wrap(errs.ListenerFailed, fmt.Errorf("checking message 7: %w",
		errs.Wrap(PluginCrashedCode, inner, "the guard died")), "admission failed").WithReason("host/listener")
	for _, tc := range []struct {
		name string
		err  error
		// every code and reason the chain holds, each must hold after the trip
		has [][2]string
	}{
		{"as is", inner, [][2]string{{"AGENT_ADMISSION_REJECTED", "guard/too-long"}}},
		{"wrapped", fmt.Errorf("checking message 7: %w", inner), [][2]string{{"AGENT_ADMISSION_REJECTED", "guard/too-long"}}},
		{"with a plain cause", errs.Wrap("AGENT_ADMISSION_REJECTED", errors.New("disk full"), "cannot log").WithReason("guard/io"),
			[][2]string{{"AGENT_ADMISSION_REJECTED", "guard/io"}}},
		{"a chain of codes", deep, [][2]string{{string(errs.ListenerFailed), "host/listener"}, {string(PluginCrashedCode), ""}, {"AGENT_ADMISSION_REJECTED", "guard/too-long"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Through the bytes, as on the real path.
			b, err := proto.Marshal(sdk.ErrorToProto(tc.err))
			if err != nil {
				t.Fatal(err)
			}
			var w pluginv1.Error
			if err := proto.Unmarshal(b, &w); err != nil {
				t.Fatal(err)
			}
			back := sdk.ErrorFromProto(&w)
			if back.Error() != tc.err.Error() {
				t.Errorf("text changed:\n\t%s\nbecame\n\t%s", tc.err, back)
			}
			for _, cr := range tc.has {
				if !errs.Has(back, errs.Code(cr[0]), cr[1]) {
					t.Errorf("%s (%s) lost in %v", cr[0], cr[1], back)
				}
			}
			if errs.CodeOf(back) != errs.CodeOf(tc.err) || errs.ReasonOf(back) != errs.ReasonOf(tc.err) {
				t.Errorf("outermost code/reason: %s/%s, want %s/%s", errs.CodeOf(back), errs.ReasonOf(back), errs.CodeOf(tc.err), errs.ReasonOf(tc.err))
			}
		})
	}
	if e := sdk.ErrorFromProto(sdk.ErrorToProto(inner)).(*errs.Error); e.Details["limit"] != float64(4000) {
		t.Fatalf("details lost: %v", e.Details)
	}
	if e := sdk.ErrorFromProto(sdk.ErrorToProto(errors.New("plain"))); !errs.HasCode(e, sdk.PluginError) {
		t.Fatalf("an error without a code travels as %s, got %v", sdk.PluginError, e)
	}
	// What a plugin in another language sends: a bare message.
	if e := sdk.ErrorFromProto(&pluginv1.Error{Message: "boom"}); !errs.HasCode(e, sdk.PluginError) || !strings.Contains(e.Error(), "boom") {
		t.Fatalf("a bare message arrives as %s, got %v", sdk.PluginError, e)
	}
}

// PluginCrashedCode stands for a host code in the middle of a chain.
const PluginCrashedCode errs.Code = "PLUGIN_CRASHED"
