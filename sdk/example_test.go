package sdk_test

import (
	stdctx "context"
	"strings"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// A plugin binary's whole main: refuse unattended messages, redact a word
// in the others, and keep a tool away from the model.
func Example() {
	p := sdk.New("house-rules", "1.0.0")
	p.Admission(func(ctx stdctx.Context, a *sdk.Admission, next sdk.AdmissionNext) (*sdk.Decision, error) {
		if a.IsUnattended() {
			return sdk.Reject("house-rules/unattended", "only people may write here", false), nil
		}
		a.Message.Content = strings.ReplaceAll(a.Message.Content, "hunter2", "[redacted]")
		return next(ctx, a) // admit, with the redacted message
	})
	p.ToolExecute(func(ctx stdctx.Context, x *sdk.ToolExecution, next sdk.ToolNext) (*sdk.ToolResult, error) {
		if x.Call.Name == "shell" {
			return sdk.Deny("the shell tool is off in this house"), nil
		}
		return next(ctx, x)
	})
	p.Waterfall("agent/request", func(ctx stdctx.Context, call sdk.Call, next sdk.Next) (*pluginv1.Result, error) {
		p.Logger.Debug("model request", "agent", call.Scope, "messages", len(call.Payload.GetRequest().GetRequest().GetMessages()))
		return next(ctx, nil) // nil: pass the payload on unchanged
	})
	p.Serve() // started by a dsh host; run by hand, it says so and exits
}
