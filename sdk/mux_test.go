package sdk_test

import (
	stdctx "context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// muxPlugin holds every admission whose message says "hold" until its
// call is cancelled (reporting that on cancelled), refuses "deadline" with
// its deadline and "trace" with its traceparent, and passes everything
// else on to next, prefixed with "seen:".
func muxPlugin(cancelled chan<- string) *sdk.Plugin {
	p := sdk.New("mux", "0.1.0")
	p.Admission(func(ctx stdctx.Context, a *sdk.Admission, next sdk.AdmissionNext) (*sdk.Decision, error) {
		text := a.GetMessage().GetContent()
		switch {
		case strings.HasPrefix(text, "hold"):
			<-ctx.Done()
			cancelled <- text
			return nil, ctx.Err()
		case text == "deadline":
			dl, ok := ctx.Deadline()
			if !ok {
				return sdk.Reject("mux/no-deadline", "none", false), nil
			}
			return sdk.Reject("mux/deadline", time.Until(dl).Round(time.Second).String(), false), nil
		case text == "trace":
			return sdk.Reject("mux/trace", sdk.Traceparent(ctx), false), nil
		}
		a.Message.Content = "seen:" + text
		return next(ctx, a)
	})
	p.Tool(&sdk.ToolDecl{Name: "echo"}, func(_ stdctx.Context, inv *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		return sdk.Text("echo " + inv.GetCall().GetArguments()), nil
	})
	return p
}

func admission(id uint64, text string) *pluginv1.MuxHostFrame {
	return &pluginv1.MuxHostFrame{Id: id, Msg: &pluginv1.MuxHostFrame_Call{Call: &pluginv1.HostMessage{Msg: &pluginv1.HostMessage_Start{Start: &pluginv1.CallStart{
		Event: sdk.AdmissionEvent, ScopeTag: "main",
		Payload: &pluginv1.Payload{Event: &pluginv1.Payload_Admission{Admission: &pluginv1.Admission{AgentId: "main", Message: &pluginv1.Message{Role: "user", Content: text}}}},
	}}}}}
}

func admit(id uint64, reason string) *pluginv1.MuxHostFrame {
	return &pluginv1.MuxHostFrame{Id: id, Msg: &pluginv1.MuxHostFrame_Call{Call: &pluginv1.HostMessage{Msg: &pluginv1.HostMessage_NextResult{NextResult: &pluginv1.NextResult{
		Result: &pluginv1.Result{Event: &pluginv1.Result_Decision{Decision: &pluginv1.Decision{Kind: "reject", Reason: reason}}},
	}}}}}
}

// TestMuxCarriesConcurrentCallsWithNext: calls on one stream run at once.
// Three calls ask for next; the host answers them in reverse order, each
// with a result naming its call, and each call ends with its own answer —
// frames are matched by id, not by order. A tool call on the same stream
// answers meanwhile, and a held call is cancelled by its cancel frame
// alone: the stream and the calls after it go on.
func TestMuxCarriesConcurrentCallsWithNext(t *testing.T) {
	cancelled := make(chan string, 1)
	c := serve(t, muxPlugin(cancelled))
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	stream, err := c.Mux(ctx)
	if err != nil {
		t.Fatal(err)
	}
	send := func(f *pluginv1.MuxHostFrame) {
		t.Helper()
		if err := stream.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	recv := func() *pluginv1.MuxPluginFrame {
		t.Helper()
		f, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	send(admission(9, "hold"))
	texts := map[uint64]string{1: "a", 2: "b", 3: "c"}
	for id, text := range texts {
		send(admission(id, text))
	}
	asked := map[uint64]string{}
	for len(asked) < 3 {
		f := recv()
		next := f.GetCall().GetNext()
		if next == nil {
			t.Fatalf("frame %d: want a NextRequest, got %v", f.Id, f)
		}
		asked[f.Id] = next.GetPayload().GetAdmission().GetMessage().GetContent()
	}
	for id, text := range texts {
		if asked[id] != "seen:"+text {
			t.Fatalf("call %d passed %q to next, want %q", id, asked[id], "seen:"+text)
		}
	}
	send(&pluginv1.MuxHostFrame{Id: 4, Msg: &pluginv1.MuxHostFrame_Tool{Tool: &pluginv1.ToolInvocation{Call: &pluginv1.ToolCall{Name: "echo", Arguments: `{"x":1}`}}}})
	if f := recv(); f.Id != 4 || f.GetTool().GetResult().GetContent() != `echo {"x":1}` {
		t.Fatalf("the tool call's outcome: %v", f)
	}
	for _, id := range []uint64{3, 2, 1} {
		send(admit(id, texts[id]))
	}
	for range 3 {
		f := recv()
		if got := f.GetCall().GetResult().GetResult().GetDecision().GetReason(); got != texts[f.Id] {
			t.Fatalf("call %d ended with the answer %q, want its own, %q", f.Id, got, texts[f.Id])
		}
	}
	send(&pluginv1.MuxHostFrame{Id: 9, Msg: &pluginv1.MuxHostFrame_Cancel{Cancel: &pluginv1.MuxCancel{}}})
	select {
	case text := <-cancelled:
		if text != "hold" {
			t.Fatalf("cancelled %q", text)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a cancel frame did not cancel its call's context")
	}
	send(admission(10, "deadline"))
	if f := recv(); f.Id != 10 || f.GetCall().GetResult().GetResult().GetDecision().GetReason() != "mux/no-deadline" {
		t.Fatalf("after a cancel the stream goes on, and the cancelled call sends nothing: %v", f)
	}
}

// TestMuxCallContext: a call's timeout and metadata reach the handler's
// ctx as an RPC's deadline and metadata would.
func TestMuxCallContext(t *testing.T) {
	c := serve(t, muxPlugin(make(chan string, 1)))
	stream, err := c.Mux(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f := admission(1, "deadline")
	f.TimeoutUs = (30 * time.Second).Microseconds()
	g := admission(2, "trace")
	const tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	g.Metadata = map[string]string{"traceparent": tp}
	for _, f := range []*pluginv1.MuxHostFrame{f, g} {
		if err := stream.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	got := map[uint64]string{}
	for range 2 {
		f, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got[f.Id] = f.GetCall().GetResult().GetResult().GetDecision().GetMessage()
	}
	if got[1] != "30s" || got[2] != tp {
		t.Fatalf("the handler saw deadline %q and traceparent %q", got[1], got[2])
	}
}

// TestMuxEndsCallsWithTheStream: when the host ends the stream, every call
// still running on it is cancelled.
func TestMuxEndsCallsWithTheStream(t *testing.T) {
	cancelled := make(chan string, 2)
	c := serve(t, muxPlugin(cancelled))
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	stream, err := c.Mux(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, text := range []string{"hold 1", "hold 2"} {
		if err := stream.Send(admission(uint64(id+1), text)); err != nil {
			t.Fatal(err)
		}
	}
	// The plugin has both calls once a third, which answers, answered:
	// frames are handled in order.
	if err := stream.Send(admission(3, "deadline")); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	var got []string
	for range 2 {
		select {
		case text := <-cancelled:
			got = append(got, text)
		case <-time.After(5 * time.Second):
			t.Fatalf("calls still running after the stream ended; cancelled: %v", got)
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"hold 1", "hold 2"}) {
		t.Fatalf("cancelled %v", got)
	}
}

// TestMuxDeliversBatches: a batch of notifications on the stream reaches
// the listeners in order, and its answer names the one that failed.
func TestMuxDeliversBatches(t *testing.T) {
	p := sdk.New("emits", "0.1.0")
	var heard []string
	p.Emit("agent/status", func(_ stdctx.Context, call sdk.Call) error {
		heard = append(heard, call.Scope)
		if call.Scope == "bad" {
			return errs.New(errs.InvalidArgument, "bad scope")
		}
		return nil
	})
	stream, err := serve(t, p).Mux(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var emits []*pluginv1.EmitRequest
	for _, scope := range []string{"a", "bad", "c"} {
		emits = append(emits, &pluginv1.EmitRequest{Event: "agent/status", ScopeTag: scope})
	}
	if err := stream.Send(&pluginv1.MuxHostFrame{Id: 7, Msg: &pluginv1.MuxHostFrame_Emits{Emits: &pluginv1.EmitBatchRequest{Emits: emits}}}); err != nil {
		t.Fatal(err)
	}
	f, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	fails := f.GetEmitted().GetFailures()
	if f.Id != 7 || len(fails) != 1 || fails[0].GetIndex() != 1 || !slices.Equal(heard, []string{"a", "bad", "c"}) {
		t.Fatalf("frame %d, failures %v, heard %v", f.Id, fails, heard)
	}
}

// TestDescribeAcceptsMux: every plugin built with this SDK offers the
// stream.
func TestDescribeAcceptsMux(t *testing.T) {
	d, err := serve(t, sdk.New("x", "1")).Describe(stdctx.Background(), &pluginv1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(d.GetAccepts(), sdk.Mux) {
		t.Fatalf("accepts %v", d.GetAccepts())
	}
}

// tools counts the tool calls a wrapper of Server() sees.
type tools struct {
	pluginv1.PluginServer
	seen atomic.Int32
}

func (w *tools) ExecuteTool(ctx stdctx.Context, inv *pluginv1.ToolInvocation) (*pluginv1.ToolOutcome, error) {
	w.seen.Add(1)
	return w.PluginServer.ExecuteTool(ctx, inv)
}

// TestWithoutMux: a wrapper of Server() in WithoutMux declines the stream
// (a host then sends each call as an RPC, which the wrapper sees) and
// still accepts the rest.
func TestWithoutMux(t *testing.T) {
	p := sdk.New("x", "1")
	p.Tool(&sdk.ToolDecl{Name: "t"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) { return sdk.Text("ok"), nil })
	w := &tools{PluginServer: p.Server()}
	c := serveServer(t, sdk.WithoutMux(w))
	d, err := c.Describe(stdctx.Background(), &pluginv1.DescribeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(d.GetAccepts(), sdk.Mux) || !slices.Contains(d.GetAccepts(), sdk.EmitBatch) {
		t.Fatalf("accepts %v, want emit-batch without mux", d.GetAccepts())
	}
	stream, err := c.Mux(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unimplemented {
		t.Fatalf("the Mux stream of a server without it: %v", err)
	}
	out, err := c.ExecuteTool(stdctx.Background(), &pluginv1.ToolInvocation{Call: &pluginv1.ToolCall{Name: "t", Arguments: "{}"}})
	if err != nil || out.GetResult().GetContent() != "ok" || w.seen.Load() != 1 {
		t.Fatalf("%v %v, the wrapper saw %d calls", out, err, w.seen.Load())
	}
}

// TestMuxACallThatWaitsHoldsUpNoOther: calls run on the goroutine reading
// the stream until they wait; a tool call that blocks until a later call
// on the same stream releases it still gets that call read and answered,
// and then returns itself.
func TestMuxACallThatWaitsHoldsUpNoOther(t *testing.T) {
	released := make(chan struct{})
	p := sdk.New("x", "1")
	p.Tool(&sdk.ToolDecl{Name: "wait"}, func(ctx stdctx.Context, _ *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		select {
		case <-released:
			return sdk.Text("released"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	})
	p.Tool(&sdk.ToolDecl{Name: "release"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		close(released)
		return sdk.Text("done"), nil
	})
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	stream, err := serve(t, p).Mux(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for id, name := range []string{"wait", "release"} {
		f := &pluginv1.MuxHostFrame{Id: uint64(id + 1), TimeoutUs: 10_000_000, Msg: &pluginv1.MuxHostFrame_Tool{Tool: &pluginv1.ToolInvocation{Call: &pluginv1.ToolCall{Name: name, Arguments: "{}"}}}}
		if err := stream.Send(f); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	for range 2 {
		f, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d:%s", f.Id, f.GetTool().GetResult().GetContent()))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"1:released", "2:done"}) {
		t.Fatalf("answers %v, want the release's and the call it released", got)
	}
}
