// Package tools is the tools service: a registry of tools, global or scoped
// to one agent (each agent's scope holds a service of its own), and the
// pipeline every call passes through.
//
// # The stages of a call
//
// Service.Execute takes one call through three stages, in this order:
//
//  1. Validation. The arguments are checked against the tool's JSON schema,
//     compiled once when the tool is registered (an invalid schema is a
//     registration error). Arguments that are not JSON or do not match
//     never reach a policy or the tool: the model gets an error result that
//     names each wrong argument and what was expected. Empty arguments mean
//     {}. This holds for every tool registered through the service,
//     plugin-provided ones included.
//  2. Approval. First the agent's Gate, when one is provided (plan mode):
//     its refusal is final, no policy sees the call. Then tools/approve (EventApprove) asks the policy plugins, ending
//     with the tool's own default (Tool.Approval, allow when unset). Deny is
//     an error result carrying the reason and who denied. Ask goes to the
//     answerer attached to the agent through the approval service (allow
//     once, allow for this session, deny); with nobody attached the call
//     fails closed: an error result telling the model the call was not
//     approved and how an operator can allow it.
//  3. Execution. tools/execute (EventExecute) wraps the tool: sandboxes,
//     logging and hooks listen there; the default runs the tool.
//
// Every refusal is a Result with IsError, so the model can act on it. A Go
// error comes back only when the call's ctx ends (the turn is aborted) and
// when a tool or a listener panics.
package tools

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"github.com/dsh-go/dsh/telemetry"
	"sort"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/holdgate"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
)

// Codes of the tools service.
const (
	// ToolPanicked: a tool's Execute panicked; the turn that ran it fails.
	ToolPanicked errs.Code = "TOOL_PANICKED"
	// NotApproved: the call's context ended while the approval stage
	// decided it (a cancel withdrew the question): the tool never ran.
	// It wraps the context's error, so errors.Is still sees the cancel.
	NotApproved errs.Code = "TOOL_NOT_APPROVED"
)

// Key is the service key.
var Key = dshctx.NewKey[*Service]("tools")

// Plugin provides the service.
var Plugin = dshctx.Define("tools", func(ctx *dshctx.Context, _ dshctx.None) error {
	return Key.Provide(ctx, New())
})

// Call is one tool invocation.
type Call struct {
	AgentID   string
	ID        string
	Name      string
	Arguments json.RawMessage
	// Workspace is the agent's workspace, an absolute path: tools confine
	// what they touch to it.
	Workspace string
	// Unattended: the turn was started or steered by a source no person
	// watches; the approval stage refuses instead of asking.
	Unattended bool
	// Sources are who is behind the turn's inputs (principal, entry point,
	// on whose behalf), each once, the turn's first input first; a
	// steering message from another sender adds its own. Approval
	// policies decide by them; the slice is shared, never modify it.
	Sources []llm.Provenance
}

// Result is what the model is told about a call. A failed call is a result
// with IsError, so the model can react to it.
type Result struct {
	Content string `json:"content"`
	IsError bool   `json:"is_error,omitempty"`
	// Parts are images or files the call produced (reading a PNG), bytes
	// in Data: the agent loop stores them in the attachments service and
	// the tool/result message carries them by reference after Content.
	Parts []llm.Part `json:"parts,omitempty"`
}

// Tool is an executable tool.
type Tool struct {
	Name        string
	Description string
	// Parameters is the JSON schema of the arguments; a call whose
	// arguments do not match it never runs.
	Parameters json.RawMessage
	// ParallelSafe tools may run at the same time as the other
	// parallel-safe calls of a step (reads, listings, searches); a tool
	// that is not runs alone, after the calls before it and before the
	// calls after it.
	ParallelSafe bool
	// Spawns marks a tool whose call starts an agent (a subagent): the
	// agent loop caps such calls per step (llm.Limits.MaxSubagentCalls).
	Spawns bool
	// Approval is what the approval stage decides for a call of this tool
	// when no policy plugin decides otherwise; "" means Allow.
	Approval Decision
	// ReadOnly declares that the tool changes nothing outside the session
	// (it reads the workspace, the clock, or the session's own plan and
	// todos): plan mode lets its calls run. A tool that does not declare it
	// is refused in plan mode.
	ReadOnly bool
	// ReadOnlyCall, when set, decides per call instead of ReadOnly (bash:
	// a command on the read-only list): ok says the call only reads, why
	// otherwise says what in it may write.
	ReadOnlyCall func(call Call) (ok bool, why string)
	// Summary, when set, shows a call to the person asked to approve it,
	// whole (exit_plan_mode: the plan); else the command or the
	// arguments, cut to 200 bytes.
	Summary func(call Call) string
	Execute func(ctx stdctx.Context, call Call) (Result, error)
}

// Decision is the approval stage's answer for one call.
type Decision string

// Decisions of the approval stage.
const (
	// Allow runs the call.
	Allow Decision = "allow"
	// Deny answers the call with an error result carrying the reason.
	Deny Decision = "deny"
	// Ask hands the call to the person attached to the agent, or fails
	// closed when nobody is.
	Ask Decision = "ask"
)

// Execution is the payload of tools/execute. Tool is nil when no tool of
// that name is registered for the agent.
type Execution struct {
	Call Call
	Tool *Tool
}

// EventExecute wraps every tool call. The default runs the tool: an error
// it returns becomes an error result, a panic fails the call.
var EventExecute = waterfall.New("tools/execute", runTool)

// Listener signatures of tools/execute, so a plugin can name them.
type (
	// ExecuteListener wraps a tool call: it may refuse, rewrite or observe
	// it; see EventExecute.
	ExecuteListener = waterfall.Listener[Execution, Result]
	// ExecuteNext passes a tool call on to the rest of tools/execute, which
	// ends by running the tool.
	ExecuteNext = waterfall.Next[Execution, Result]
)

func runTool(ctx stdctx.Context, x Execution) (r Result, err error) {
	if x.Tool == nil {
		return Result{Content: fmt.Sprintf("unknown tool %q", x.Call.Name), IsError: true}, nil
	}
	defer func() {
		if p := recover(); p != nil {
			r, err = Result{}, errs.New(ToolPanicked, fmt.Sprintf("tool %q panicked: %v", x.Call.Name, p))
		}
	}()
	res, e := x.Tool.Execute(ctx, x.Call)
	if e != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{Content: e.Error(), IsError: true}, nil
	}
	return res, nil
}

// Service is the tools of one scope. The root's service holds the global
// tools; an agent's scope gets a service of its own, made on the first tool
// registered there and provided in that scope, whose lookups fall back to
// the service around it. So a tool in an agent's scope shadows a global tool
// of the same name for that agent only, and leaves with the scope.
type Service struct {
	parent *Service
	mu     sync.RWMutex
	tools  map[string]*entry
	// gate is the approval stage's hold (the root's alone is used).
	gate holdgate.Gate
}

// entry is a registered tool with its compiled schema (nil when the tool
// declares no parameters).
type entry struct {
	tool   Tool
	schema *compiled
}

// New returns an empty registry.
func New() *Service { return &Service{tools: map[string]*entry{}} }

// Register adds t in ctx's scope until ctx's fiber goes away. A tool in an
// agent's scope shadows a global tool of the same name for that agent. Its
// Parameters are compiled here, once: a schema that is not valid JSON
// Schema (draft 2020-12, self-contained) fails the registration.
func (s *Service) Register(ctx *dshctx.Context, t Tool) error {
	if t.Name == "" || t.Execute == nil {
		return errs.New(errs.InvalidArgument, "tools.Register: a tool needs a name and an Execute function")
	}
	schema, err := compileSchema(t.Name, t.Parameters)
	if err != nil {
		return err
	}
	in, err := s.own(ctx)
	if err != nil {
		return err
	}
	tool := &entry{tool: t, schema: schema}
	_, err = ctx.Effect("tool "+t.Name, func() (dshctx.Disposer, error) {
		in.mu.Lock()
		defer in.mu.Unlock()
		if _, taken := in.tools[t.Name]; taken {
			return nil, errs.New(errs.ServiceConflict, fmt.Sprintf("tool %q is already registered in this scope", t.Name))
		}
		in.tools[t.Name] = tool
		return func() error {
			in.mu.Lock()
			defer in.mu.Unlock()
			delete(in.tools, t.Name)
			return nil
		}, nil
	})
	return err
}

// own returns the service of ctx's scope, providing one there first if the
// scope has none: outside any agent's scope that is s itself.
func (s *Service) own(ctx *dshctx.Context) (*Service, error) {
	if ctx.Tag() == "" {
		return s, nil
	}
	return Key.Own(ctx, func() *Service { return &Service{parent: s, tools: map[string]*entry{}} })
}

// seenFrom returns the service of at's scope when it was made under s, and
// s otherwise.
func (s *Service) seenFrom(at *dshctx.Context) *Service {
	if at.Tag() != "" {
		if in, ok := Key.Local(at); ok && in.parent == s {
			return in
		}
	}
	return s
}

// Lookup returns the tool name as code in at's scope sees it.
func (s *Service) Lookup(at *dshctx.Context, name string) *Tool {
	if e := s.lookup(at, name); e != nil {
		return &e.tool
	}
	return nil
}

func (s *Service) lookup(at *dshctx.Context, name string) *entry {
	for in := s.seenFrom(at); in != nil; in = in.parent {
		in.mu.RLock()
		e := in.tools[name]
		in.mu.RUnlock()
		if e != nil {
			return e
		}
	}
	return nil
}

// Specs describes the tools visible in at's scope, sorted by name.
func (s *Service) Specs(at *dshctx.Context) []llm.ToolSpec {
	seen := map[string]*Tool{}
	for in := s.seenFrom(at); in != nil; in = in.parent {
		in.mu.RLock()
		for n, e := range in.tools {
			if seen[n] == nil {
				seen[n] = &e.tool
			}
		}
		in.mu.RUnlock()
	}
	out := make([]llm.ToolSpec, 0, len(seen))
	for _, t := range seen {
		out = append(out, llm.ToolSpec{Name: t.Name, Description: t.Description, Parameters: t.Parameters})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Execute takes call, for the agent whose scope is at, through validation,
// tools/approve and tools/execute (see the package doc). It is safe to call
// from several goroutines at once. A call of a tool the agent does not have
// goes straight to tools/execute, whose default answers it with an error
// result.
func (s *Service) Execute(ctx stdctx.Context, at *dshctx.Context, call Call) (Result, error) {
	if telemetry.Enabled() {
		return s.executeTraced(ctx, at, call)
	}
	return s.execute(ctx, at, call)
}

func (s *Service) execute(ctx stdctx.Context, at *dshctx.Context, call Call) (Result, error) {
	e := s.lookup(at, call.Name)
	if e == nil {
		return EventExecute.Dispatch(ctx, at, Execution{Call: call})
	}
	if len(bytes.TrimSpace(call.Arguments)) == 0 {
		call.Arguments = emptyObject()
	}
	if r, ok := validate(e.schema, call); !ok {
		return r, nil
	}
	call, r, ok, err := s.approve(ctx, at, e, call)
	if !ok || err != nil {
		return r, err
	}
	return EventExecute.Dispatch(ctx, at, Execution{Call: call, Tool: &e.tool})
}
