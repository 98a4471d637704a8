package sdk_test

import (
	stdctx "context"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/protobuf/proto"
)

func invocation(name, args string) *pluginv1.ToolInvocation {
	return &pluginv1.ToolInvocation{AgentId: "main", Workspace: "/w", Call: &pluginv1.ToolCall{Id: "c1", Name: name, Arguments: args}}
}

func TestToolIsDescribedAndExecuted(t *testing.T) {
	p := sdk.New("words", "1.0.0")
	decl := &sdk.ToolDecl{Name: "word_count", Description: "counts words", Parameters: `{"type":"object"}`, ParallelSafe: true, Approval: "ask"}
	p.Tool(decl, func(ctx stdctx.Context, inv *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		var args struct {
			Text string `json:"text"`
		}
		if err := sdk.Arguments(inv, &args); err != nil {
			return nil, err
		}
		return sdk.Text(inv.AgentId + ":" + inv.Workspace + ":" + strings.ToUpper(args.Text)), nil
	})
	c := serve(t, p)
	desc, err := c.Describe(stdctx.Background(), &pluginv1.DescribeRequest{ProtocolVersion: sdk.ProtocolVersion})
	if err != nil || len(desc.Tools) != 1 || !proto.Equal(desc.Tools[0], decl) {
		t.Fatalf("describe: %v %v", desc, err)
	}
	out, err := c.ExecuteTool(stdctx.Background(), invocation("word_count", `{"text":"hi"}`))
	if err != nil || out.Error != nil || out.Result.Content != "main:/w:HI" || out.Result.IsError {
		t.Fatalf("execute: %v %v", out, err)
	}
}

func TestToolErrorsPanicsAndUnknownTools(t *testing.T) {
	p := sdk.New("bad", "1.0.0")
	p.Logger = hclog.NewNullLogger()
	p.Tool(&sdk.ToolDecl{Name: "panics"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		panic("boom")
	})
	p.Tool(&sdk.ToolDecl{Name: "fails"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		return nil, errs.New("DISK_FULL", "no space left")
	})
	p.Tool(&sdk.ToolDecl{Name: "refuses"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		return sdk.Failed("no file %q", "x"), nil
	})
	p.Tool(&sdk.ToolDecl{Name: "args"}, func(_ stdctx.Context, inv *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		var n int
		return nil, sdk.Arguments(inv, &n)
	})
	c := serve(t, p)
	for _, tc := range []struct{ tool, code, text string }{
		{"panics", string(errs.ListenerFailed), `the tool "panics" panicked: boom`},
		{"fails", "DISK_FULL", "no space left"},
		{"nothing", string(errs.InvalidArgument), `declares no tool "nothing"`},
		{"args", string(errs.InvalidArgument), `the arguments of "args" do not decode into *int`},
	} {
		out, err := c.ExecuteTool(stdctx.Background(), invocation(tc.tool, `{}`))
		if err != nil || out.Error == nil || out.Error.Code != tc.code || !strings.Contains(sdk.ErrorFromProto(out.Error).Error(), tc.text) {
			t.Errorf("%s: %v %v", tc.tool, out, err)
		}
	}
	out, err := c.ExecuteTool(stdctx.Background(), invocation("refuses", ""))
	if err != nil || !out.Result.IsError || out.Result.Content != `no file "x"` {
		t.Fatalf("refuses: %v %v", out, err)
	}
	// The server survived the panic.
	if _, err := c.Describe(stdctx.Background(), &pluginv1.DescribeRequest{}); err != nil {
		t.Fatal(err)
	}
}

// TestToolCancellationReachesTheHandler: the host cancelling the RPC (the
// model's abort) ends the handler's ctx.
func TestToolCancellationReachesTheHandler(t *testing.T) {
	p := sdk.New("slow", "1.0.0")
	started, stopped := make(chan struct{}), make(chan struct{})
	p.Tool(&sdk.ToolDecl{Name: "wait"}, func(ctx stdctx.Context, _ *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		close(started)
		<-ctx.Done()
		close(stopped)
		return nil, ctx.Err()
	})
	c := serve(t, p)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	done := make(chan error, 1)
	go func() {
		_, err := c.ExecuteTool(ctx, invocation("wait", ""))
		done <- err
	}()
	<-started
	cancel()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler's ctx never ended")
	}
	if err := <-done; err == nil {
		t.Fatal("a cancelled call must fail on the host's side")
	}
}

func TestResultHelpers(t *testing.T) {
	r := sdk.Parts(sdk.TextPart("a"), sdk.ImagePart("image/png", []byte{1, 2}))
	if len(r.Parts) != 2 || r.Parts[0].GetText() != "a" || r.Parts[1].GetImage().GetMediaType() != "image/png" || len(r.Parts[1].GetImage().GetData()) != 2 {
		t.Fatalf("%v", r)
	}
	if f := sdk.Failed("x %d", 1); !f.IsError || f.Content != "x 1" {
		t.Fatalf("%v", f)
	}
}
