package sdktest

import (
	stdctx "context"
	"encoding/json"
	"fmt"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// CallOption changes one tool call.
type CallOption func(*pluginv1.ToolInvocation)

// InWorkspace sets the agent's workspace the tool is told about.
func InWorkspace(dir string) CallOption {
	return func(inv *pluginv1.ToolInvocation) { inv.Workspace = dir }
}

// AsAgent sets the agent whose model makes the call (default "main").
func AsAgent(id string) CallOption { return func(inv *pluginv1.ToolInvocation) { inv.AgentId = id } }

// Unattended marks the call as one no person watches (a schedule, a
// webhook).
func Unattended() CallOption { return func(inv *pluginv1.ToolInvocation) { inv.Unattended = true } }

// CallTool calls the plugin's tool name with args (any value that
// marshals to a JSON object; a string or []byte is sent as written) and
// returns what the model would be told. A failure the plugin returned as
// an error, rather than as an error result, comes back as the error, with
// its code: an empty result is sdk.EmptyResult. The tool must be declared:
// dsh never calls one that is not.
func (h *Host) CallTool(ctx stdctx.Context, name string, args any, opts ...CallOption) (*sdk.ToolResult, error) {
	if h.Tool(name) == nil {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("the plugin %q declares no tool %q; it declares %v", h.desc.GetName(), name, h.toolNames()))
	}
	var text string
	switch a := args.(type) {
	case nil:
		text = "{}"
	case string:
		text = a
	case []byte:
		text = string(a)
	default:
		b, err := json.Marshal(args)
		if err != nil {
			return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("the arguments of %q (%T) cannot be sent as JSON", name, args))
		}
		text = string(b)
	}
	inv := &pluginv1.ToolInvocation{AgentId: "main", Call: &pluginv1.ToolCall{Id: "call-1", Name: name, Arguments: text}}
	for _, o := range opts {
		o(inv)
	}
	out, err := h.executeTool(ctx, inv)
	if err != nil {
		return nil, err
	}
	if out.GetError() != nil {
		return nil, sdk.ErrorFromProto(out.GetError())
	}
	return out.GetResult(), nil
}

func (h *Host) toolNames() []string {
	var names []string
	for _, d := range h.desc.GetTools() {
		names = append(names, d.GetName())
	}
	return names
}
