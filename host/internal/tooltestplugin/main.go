// Command tooltestplugin is the tool plugin binary the host's tests drive.
// Its tools show what a call did (files named in its config); environment
// variables make its declaration bad on purpose (TOOLTEST_BAD), change it
// from one start to the next (TOOLTEST_GEN), make every start after the
// first hang (TOOLTEST_HANG_AFTER_FIRST) or break ExecuteTool (TOOLTEST_RAW).
package main

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

type config struct {
	// CallsFile receives one line per call that reached the plugin.
	CallsFile string `json:"calls_file"`
	// Marker receives "started" when hold begins and "cancelled" when its
	// ctx ends.
	Marker string `json:"marker"`
}

var (
	cfg  config
	meet struct {
		sync.Mutex
		n    int
		wake chan struct{}
	}
)

func main() {
	p := sdk.New("tooltest", "0.1.0")
	p.OnConfigure(func(raw json.RawMessage) error { return json.Unmarshal(raw, &cfg) })
	if file := os.Getenv("TOOLTEST_HANG_AFTER_FIRST"); file != "" {
		if _, err := os.Stat(file); err == nil {
			p.OnConfigure(func(json.RawMessage) error { select {} }) // until the host kills it
		} else {
			os.WriteFile(file, nil, 0o644)
		}
	}
	second := false
	if file := os.Getenv("TOOLTEST_GEN"); file != "" {
		if _, err := os.Stat(file); err == nil {
			second = true
		} else {
			os.WriteFile(file, nil, 0o644)
		}
	}
	p.Tool(&sdk.ToolDecl{Name: "echo", Description: "echoes text",
		Parameters: `{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`}, echo)
	p.Tool(&sdk.ToolDecl{Name: "shout", Description: "needs approval", Approval: "ask"}, echo)
	p.Tool(&sdk.ToolDecl{Name: "never", Description: "denied by default", Approval: "deny"}, echo)
	p.Tool(&sdk.ToolDecl{Name: "meet", Description: "waits for n calls at once", ParallelSafe: true,
		Parameters: `{"type":"object","properties":{"n":{"type":"integer"}}}`}, meetCalls)
	p.Tool(&sdk.ToolDecl{Name: "hold", Description: "holds until cancelled"}, hold)
	p.Tool(&sdk.ToolDecl{Name: "crash", Description: "exits mid-call"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	p.Tool(&sdk.ToolDecl{Name: "fail", Description: "fails in the plugin"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		return nil, errs.New("TOOLTEST_BROKE", "the tool broke")
	})
	p.Tool(&sdk.ToolDecl{Name: "absent", Description: "forgets its result"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		return nil, nil
	})
	p.Tool(&sdk.ToolDecl{Name: "blank", Description: "answers empty on purpose"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) {
		return sdk.Empty(), nil
	})
	if second {
		p.Tool(&sdk.ToolDecl{Name: "late", Description: "declared from the second start on"}, echo)
	} else {
		p.Tool(&sdk.ToolDecl{Name: "parts", Description: "answers in parts"}, func(stdctx.Context, *sdk.ToolInvocation) (*sdk.ToolResult, error) {
			return sdk.Parts(sdk.TextPart("first"), sdk.TextPart("second"), sdk.ImagePart("image/png", []byte{1, 2, 3, 4})), nil
		})
	}
	switch os.Getenv("TOOLTEST_BAD") {
	case "name":
		p.Tool(&sdk.ToolDecl{Name: "read file"}, echo)
	case "dup":
		p.Tool(&sdk.ToolDecl{Name: "echo"}, echo)
	case "approval":
		p.Tool(&sdk.ToolDecl{Name: "maybe", Approval: "sometimes"}, echo)
	case "schema":
		p.Tool(&sdk.ToolDecl{Name: "odd", Parameters: `{"type":"strnig"}`}, echo)
	case "json":
		p.Tool(&sdk.ToolDecl{Name: "broken", Parameters: `{"type":`}, echo)
	}
	if mode := os.Getenv("TOOLTEST_RAW"); mode != "" {
		plugin.Serve(&plugin.ServeConfig{
			HandshakeConfig:  sdk.Handshake,
			VersionedPlugins: sdk.VersionedPlugins(raw{p.Server(), mode}),
			GRPCServer:       plugin.DefaultGRPCServer,
		})
		return
	}
	p.Serve()
}

// raw answers ExecuteTool off the SDK: as a binary that does not implement
// it ("unimplemented"), or with neither a result nor an error ("empty").
type raw struct {
	pluginv1.PluginServer
	mode string
}

// Describe keeps a raw plugin off the Mux stream, where the SDK's own
// ExecuteTool would answer instead of the one above.
func (r raw) Describe(ctx stdctx.Context, req *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	d, err := r.PluginServer.Describe(ctx, req)
	if d != nil {
		d.Accepts = slices.DeleteFunc(d.Accepts, func(f string) bool { return f == sdk.Mux })
	}
	return d, err
}

func (r raw) ExecuteTool(stdctx.Context, *sdk.ToolInvocation) (*pluginv1.ToolOutcome, error) {
	if r.mode == "unimplemented" {
		return nil, status.Error(codes.Unimplemented, "method ExecuteTool not implemented")
	}
	return &pluginv1.ToolOutcome{}, nil
}

func record(inv *sdk.ToolInvocation) {
	if cfg.CallsFile == "" {
		return
	}
	f, err := os.OpenFile(cfg.CallsFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s %s %s workspace=%s unattended=%v\n", inv.AgentId, inv.Call.Name, inv.Call.Arguments, inv.Workspace, inv.Unattended)
}

func echo(_ stdctx.Context, inv *sdk.ToolInvocation) (*sdk.ToolResult, error) {
	record(inv)
	var args struct {
		Text string `json:"text"`
	}
	if err := sdk.Arguments(inv, &args); err != nil {
		return nil, err
	}
	return sdk.Text("echo: " + args.Text), nil
}

// meetCalls answers "met" once n calls are in the plugin at the same time,
// and "alone" if that does not happen within 10 seconds.
func meetCalls(ctx stdctx.Context, inv *sdk.ToolInvocation) (*sdk.ToolResult, error) {
	var args struct {
		N int `json:"n"`
	}
	if err := sdk.Arguments(inv, &args); err != nil {
		return nil, err
	}
	meet.Lock()
	if meet.wake == nil {
		meet.wake = make(chan struct{})
	}
	meet.n++
	wake := meet.wake
	if meet.n >= args.N {
		close(meet.wake)
		meet.n, meet.wake = 0, nil
	}
	meet.Unlock()
	select {
	case <-wake:
		return sdk.Text("met"), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(10 * time.Second):
		return sdk.Text("alone"), nil
	}
}

func hold(ctx stdctx.Context, inv *sdk.ToolInvocation) (*sdk.ToolResult, error) {
	if cfg.Marker != "" {
		os.WriteFile(cfg.Marker, []byte("started"), 0o644)
	}
	select {
	case <-ctx.Done():
		if cfg.Marker != "" {
			os.WriteFile(cfg.Marker, []byte("cancelled"), 0o644)
		}
		return nil, ctx.Err()
	case <-time.After(60 * time.Second):
		return sdk.Text("held"), nil
	}
}
