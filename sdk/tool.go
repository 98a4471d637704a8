package sdk

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"runtime/debug"

	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// EmptyResult is the code of a tool call whose handler returned neither a
// result nor an error.
const EmptyResult errs.Code = "PLUGIN_EMPTY_RESULT"

// ReasonEmptyResult is the reason of an EmptyResult error.
const ReasonEmptyResult = "sdk/empty-result"

type (
	// ToolDecl declares a tool the plugin gives the model: its name
	// (^[a-zA-Z0-9_-]{1,64}$), description, JSON Schema of the arguments
	// (as JSON text; empty for none), whether its calls may overlap with
	// other parallel-safe calls, and the approval stage's default for it
	// ("allow" or empty, "ask", "deny").
	ToolDecl = pluginv1.ToolDecl
	// ToolInvocation is one call of a declared tool: its arguments are
	// already valid against the declared schema and the call was approved.
	ToolInvocation = pluginv1.ToolInvocation
	// ContentPart is one piece of a tool's result: text or an image.
	ContentPart = pluginv1.ContentPart
	// Image is an image part's media type and bytes.
	Image = pluginv1.Image
)

// ToolHandler runs one call of a tool. ctx ends when the model's turn is
// aborted or the entry's timeout passes: stop the work and return. A
// failure the model should see and act on is a result with IsError (see
// Failed); an error is for the operator: the host logs it and tells the
// model only that the tool failed.
type ToolHandler func(ctx stdctx.Context, inv *ToolInvocation) (*ToolResult, error)

// Tool declares a tool and its handler. The host registers it where the
// entry is mounted, validates each call's arguments against
// decl.Parameters, runs the approval stage and schedules the call before
// fn runs. A declaration the host cannot accept (a bad name or schema, a
// name declared twice) fails the plugin's start with an error naming it.
func (p *Plugin) Tool(decl *ToolDecl, fn ToolHandler) {
	if p.toolFns == nil {
		p.toolFns = map[string]ToolHandler{}
	}
	p.tools = append(p.tools, decl)
	p.toolFns[decl.GetName()] = fn
}

// Text is a successful result with text for the model.
func Text(text string) *ToolResult { return &ToolResult{Content: text} }

// Empty is a deliberately empty, successful result. A handler that
// returns (nil, nil) instead fails the call with EmptyResult, so a
// forgotten return value is not taken for "nothing to say".
func Empty() *ToolResult { return &ToolResult{} }

// Failed is an error result the model sees and can act on.
func Failed(format string, args ...any) *ToolResult {
	return &ToolResult{Content: fmt.Sprintf(format, args...), IsError: true}
}

// Parts is a result made of content parts; the host joins the text parts
// for the model.
func Parts(parts ...*ContentPart) *ToolResult { return &ToolResult{Parts: parts} }

// TextPart is a text content part.
func TextPart(text string) *ContentPart {
	return &ContentPart{Part: &pluginv1.ContentPart_Text{Text: text}}
}

// ImagePart is an image content part (image/png, image/jpeg, image/gif or
// image/webp). Until dsh carries attachments the model is told an image
// was returned, its type and size, instead of seeing it.
func ImagePart(mediaType string, data []byte) *ContentPart {
	return &ContentPart{Part: &pluginv1.ContentPart_Image{Image: &Image{MediaType: mediaType, Data: data}}}
}

// Arguments decodes a call's arguments into v.
func Arguments(inv *ToolInvocation, v any) error {
	raw := inv.GetCall().GetArguments()
	if raw == "" {
		raw = "{}"
	}
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		return errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("the arguments of %q do not decode into %T; make the type match the tool's declared schema", inv.GetCall().GetName(), v))
	}
	return nil
}

// ExecuteTool implements the protocol: it runs the handler of the tool
// called, and turns a panic into an error, so one bad call does not take
// the plugin down.
func (s *server) ExecuteTool(ctx stdctx.Context, inv *ToolInvocation) (*pluginv1.ToolOutcome, error) {
	name := inv.GetCall().GetName()
	fn := s.p.toolFns[name]
	if fn == nil {
		return &pluginv1.ToolOutcome{Error: ErrorToProto(errs.New(errs.InvalidArgument, fmt.Sprintf(
			"plugin %s declares no tool %q; the host and the plugin disagree about its tools (was it rebuilt since dsh started it?)", s.p.name, name)))}, nil
	}
	res, err := s.safeTool(fn, ctx, inv)
	if err != nil {
		return &pluginv1.ToolOutcome{Error: ErrorToProto(err)}, nil
	}
	if res == nil {
		// A nil result with no error is almost always a forgotten return
		// value; passing it on as an empty result would leave the model
		// with nothing and the operator with no trace. Empty() is how an
		// author says "nothing" on purpose.
		return &pluginv1.ToolOutcome{Error: ErrorToProto(errs.New(EmptyResult, fmt.Sprintf(
			"plugin %s: the tool %q returned neither a result nor an error; return sdk.Text, sdk.Failed or an error, or sdk.Empty() for a deliberately empty result",
			s.p.name, name)).WithReason(ReasonEmptyResult))}, nil
	}
	return &pluginv1.ToolOutcome{Result: res}, nil
}

// safeTool runs fn; a panic's stack goes to the plugin's log, where its
// author looks, and not to the model.
func (s *server) safeTool(fn ToolHandler, ctx stdctx.Context, inv *ToolInvocation) (out *ToolResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			name := inv.GetCall().GetName()
			s.p.Logger.Error("a tool panicked", "tool", name, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = errs.New(errs.ListenerFailed, fmt.Sprintf("the tool %q panicked: %v", name, r))
		}
	}()
	return fn(ctx, inv)
}
