// Package subagent is the tools.agent plugin: the agent tool, with which a
// model hands a task to a child agent and gets the child's final answer
// back as the tool result (what Claude Code calls Agent, formerly Task).
//
// # What a call does
//
// A call names one of the configured subagents and gives it a prompt. The
// tool opens a session for the child through the session controller
// (services/sessions, the one layer that creates agents): the configured
// agent (template), presets, provider and model of that subagent, the
// parent's workspace unless the subagent names its own, and a session id
// derived from the parent's session and the call id (<parent
// session>.sub-<call id>-<8 random hex>, see session.ChildID), so the
// child's persisted session is listed with its parent (Summary.Parent). The task is delivered as a prompt with source
// kind subagent, so admission applies to it like to any outside message;
// a refusal is the call's error result. The tool waits for the child's
// turn to end and returns its last assistant message; then the child's
// session is closed (its agent disposed, its log flushed).
//
// # Limits
//
// max_concurrent children run at once per plugin instance (the calls of
// one step run in parallel: the tool is parallel-safe); more wait for a
// slot. max_depth bounds nesting: a parent's own depth is 0, its children
// 1; a call that would create a child deeper than max_depth is refused.
// timeout bounds one child's task: when it passes, the child's turn is
// cancelled and the call fails.
//
// # Cancel, abort and approval
//
// A cancel or abort of the parent's turn cancels the call's context; the
// tool then cancels the child's turn, closes its session and answers that
// the task was cancelled. The child's approval questions go to the
// parent's answerer: the tool attaches an answerer for the child that asks
// the parent's (through services/approval, which keeps one answerer per
// agent and one question at a time), naming the subagent in the question's
// reason. A parent with nobody attached fails the child's question closed,
// as its own; a parent turn from an unattended source makes the child's
// turn unattended too, so it never asks.
package subagent

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
	"github.com/google/uuid"
)

// Codes of the agent tool. Each starts the error result the model reads.
const (
	// UnknownAgent: the call names no configured subagent.
	UnknownAgent errs.Code = "SUBAGENT_UNKNOWN"
	// DepthExceeded: the child would be nested deeper than max_depth.
	DepthExceeded errs.Code = "SUBAGENT_DEPTH_EXCEEDED"
	// Refused: the child's session could not be opened, or admission
	// refused the task.
	Refused errs.Code = "SUBAGENT_REFUSED"
	// Failed: the child's turn ended in an error, or without an answer.
	Failed errs.Code = "SUBAGENT_FAILED"
	// TimedOut: the child did not finish within timeout.
	TimedOut errs.Code = "SUBAGENT_TIMEOUT"
	// Cancelled: the parent's turn was cancelled or aborted.
	Cancelled errs.Code = "SUBAGENT_CANCELLED"
)

// Started is the payload of subagent/started: a child's session is open
// and its task about to be delivered. A client following the parent can
// attach to SessionID through the session controller to watch the child.
type Started struct {
	// ParentAgentID and CallID name the parent's call.
	ParentAgentID, CallID string
	// Name is the subagent's configured name; Description the call's label.
	Name, Description string
	// SessionID and AgentID are the child's.
	SessionID, AgentID string
	Depth              int
}

// Ended is the payload of subagent/ended, once per Started, after the
// child's session was closed: Result is what the parent's model is told.
type Ended struct {
	Started
	Result tools.Result
}

// Notifications of the agent tool, emitted in the parent's scope.
var (
	EventStarted = waterfall.NewEmit[Started]("subagent/started")
	EventEnded   = waterfall.NewEmit[Ended]("subagent/ended")
)

// Defaults of the config.
const (
	DefaultName          = "agent"
	DefaultMaxConcurrent = 4
	DefaultMaxDepth      = 1
	DefaultTimeout       = 10 * time.Minute
	// closeTimeout bounds the close of a child session after its task,
	// when the parent's context may already be gone.
	closeTimeout = 30 * time.Second
)

// Config is the plugin's configuration.
type Config struct {
	// Name is the tool's name; default "agent".
	Name string `koanf:"name" json:"name,omitempty"`
	// Agents are the subagents the model may choose from.
	Agents []Agent `koanf:"agents" json:"agents,omitempty"`
	// MaxConcurrent caps the children of this plugin instance running at
	// once; default 4.
	MaxConcurrent int `koanf:"max_concurrent" json:"max_concurrent,omitempty"`
	// MaxDepth is how deep children may nest: 1 lets a parent's children
	// run but not create their own; default 1.
	MaxDepth int `koanf:"max_depth" json:"max_depth,omitempty"`
	// Timeout bounds one child's task; default 10m.
	Timeout time.Duration `koanf:"timeout" json:"timeout,omitempty"`
}

// Agent is one subagent the model may call.
type Agent struct {
	// Name is what the model calls it by.
	Name string `koanf:"name" json:"name"`
	// Description tells the model when to use it; listed in the tool's
	// description.
	Description string `koanf:"description" json:"description,omitempty"`
	// Agent is the configured agent (template) the child starts from; its
	// presets are mounted, then Presets.
	Agent string `koanf:"agent" json:"agent,omitempty"`
	// Presets are mounted in the child's scope: its tools and approval
	// mode (read-only, workspace-write, full-access or the config's own).
	Presets []string `koanf:"presets" json:"presets,omitempty"`
	// Provider and Model override the template's model. With neither a
	// template nor a provider the child inherits the calling agent's
	// provider, and its model unless Model names another of that
	// provider's.
	Provider string `koanf:"provider" json:"provider,omitempty"`
	Model    string `koanf:"model" json:"model,omitempty"`
	// SystemPrompt replaces the template's system prompt: the child's
	// instructions, as the body of a Claude Code agent file gives them.
	SystemPrompt string `koanf:"system_prompt" json:"system_prompt,omitempty"`
	// Workspace is the child's workspace (absolute); empty is the parent's.
	Workspace string `koanf:"workspace" json:"workspace,omitempty"`
}

// Defaults returns the default config.
func (Config) Defaults() Config {
	return Config{Name: DefaultName, MaxConcurrent: DefaultMaxConcurrent, MaxDepth: DefaultMaxDepth, Timeout: DefaultTimeout}
}

var toolName = lazyregexp.New(`^[a-zA-Z0-9_-]{1,64}$`)

// Validate checks the config.
func (c Config) Validate() error {
	bad := func(format string, args ...any) error {
		return errs.New(errs.InvalidArgument, "tools.agent: "+fmt.Sprintf(format, args...))
	}
	if !toolName.MatchString(c.Name) {
		return bad("name %q is not a tool name (letters, digits, '_' and '-', at most 64)", c.Name)
	}
	if c.MaxConcurrent < 1 {
		return bad("max_concurrent is %d; it must be at least 1", c.MaxConcurrent)
	}
	if c.MaxDepth < 1 {
		return bad("max_depth is %d; it must be at least 1 (1: children cannot create their own)", c.MaxDepth)
	}
	if c.Timeout < 10*time.Millisecond {
		// A bare number is nanoseconds: "timeout: 10" would end every
		// child before it starts.
		return bad("timeout is %v; a bare number is nanoseconds; give a duration with a unit, at least 10ms (e.g. 10m)", c.Timeout)
	}
	seen := map[string]bool{}
	for i, a := range c.Agents {
		switch {
		case a.Name == "":
			return bad("agents[%d].name is empty; the model calls a subagent by its name", i)
		case seen[a.Name]:
			return bad("agents[%d].name %q is listed twice", i, a.Name)
		case a.Workspace != "" && !strings.HasPrefix(a.Workspace, "/"):
			return bad("agents[%d].workspace %q is not an absolute path", i, a.Workspace)
		}
		seen[a.Name] = true
	}
	return nil
}

// Plugin registers the agent tool in its context's scope. With no agents
// configured it registers nothing: a tool with no choice would only cost
// the model attention.
var Plugin = plugin.Register("tools.agent", "the agent tool: hands a task to a configured subagent and returns its answer",
	func(ctx *dshctx.Context, cfg Config) error {
		if len(cfg.Agents) == 0 {
			ctx.Logger().Warn("tools.agent has no agents configured; no agent tool is registered")
			return nil
		}
		svc, err := tools.Key.Get(ctx)
		if err != nil {
			return err
		}
		ctl, err := sessions.Key.Get(ctx)
		if err != nil {
			return err
		}
		reg, err := agents.Key.Get(ctx)
		if err != nil {
			return err
		}
		ap, err := approval.Key.Get(ctx)
		if err != nil {
			return err
		}
		t := &Tool{cfg: cfg, sessions: ctl, agents: reg, approval: ap, slots: make(chan struct{}, cfg.MaxConcurrent)}
		return svc.Register(ctx, t.Spec())
	}, tools.Key, sessions.Key, agents.Key, approval.Key)

// Tool is one configured agent tool.
type Tool struct {
	cfg      Config
	sessions *sessions.Controller
	agents   *agents.Registry
	approval *approval.Service
	slots    chan struct{}
}

// Spec is the tool as registered: its description lists the subagents.
func (t *Tool) Spec() tools.Tool {
	names := make([]string, len(t.cfg.Agents))
	var b strings.Builder
	b.WriteString("Hands a task to a subagent: a separate agent with its own context, tools and model, which works on it alone " +
		"and answers with its final message, returned as this call's result. Give it everything it needs in the prompt: " +
		"it sees nothing of this conversation. Several calls in one step run at the same time. Subagents:\n")
	for i, a := range t.cfg.Agents {
		names[i] = a.Name
		fmt.Fprintf(&b, "- %s", a.Name)
		if a.Description != "" {
			fmt.Fprintf(&b, ": %s", a.Description)
		}
		b.WriteString("\n")
	}
	schema, _ := json.Marshal(map[string]any{
		"type": "object",
		"properties": map[string]any{
			"agent":       map[string]any{"type": "string", "enum": names, "description": "which subagent runs the task"},
			"description": map[string]any{"type": "string", "description": "a short label for the task (3-5 words)"},
			"prompt":      map[string]any{"type": "string", "description": "the task, complete and self-contained"},
		},
		"required":             []string{"agent", "prompt"},
		"additionalProperties": false,
	})
	return tools.Tool{Name: t.cfg.Name, Description: strings.TrimRight(b.String(), "\n"), Parameters: schema, ParallelSafe: true, Spawns: true, Execute: t.run}
}

// args are a call's arguments.
type args struct {
	Agent       string `json:"agent"`
	Description string `json:"description"`
	Prompt      string `json:"prompt"`
}

// depths holds the depth of every live child in this process, by agent
// id: a child's own agent tool may be another plugin instance (mounted by
// its preset), and the limit must hold across them.
var depths sync.Map

// depthOf is agentID's depth: 0 for an agent no agent tool created.
func depthOf(agentID string) int {
	if d, ok := depths.Load(agentID); ok {
		return d.(int)
	}
	return 0
}

func fail(err error) (tools.Result, error) {
	return tools.Result{Content: err.Error(), IsError: true}, nil
}

// childSource is who prompts a subagent: its parent agent, on behalf of
// whoever the parent's turn acts for — the person at the root of the tree
// (the parent's own OnBehalfOf when the parent is a subagent itself), so a
// policy judging the child's calls sees the same person as the parent's.
func childSource(call tools.Call) agentcontroller.Source {
	src := agentcontroller.Source{Kind: agentcontroller.SourceSubagent, RPCID: call.ID, Unattended: call.Unattended,
		Entry: "subagent", Principal: agentcontroller.Principal{Kind: "agent", ID: call.AgentID}}
	if len(call.Sources) > 0 {
		first := call.Sources[0]
		behalf := first.Principal
		if first.OnBehalfOf != nil {
			behalf = *first.OnBehalfOf
		}
		src.Principal.Tenant = behalf.Tenant
		if !behalf.IsZero() {
			src.OnBehalfOf = &behalf
		}
	}
	return src
}

func (t *Tool) run(ctx stdctx.Context, call tools.Call) (res tools.Result, err error) {
	var a args
	if err := json.Unmarshal(call.Arguments, &a); err != nil {
		return fail(errs.New(errs.InvalidArgument, fmt.Sprintf("the arguments are not a JSON object with agent and prompt: %v", err)))
	}
	spec, ok := t.lookup(a.Agent)
	if !ok {
		return fail(errs.New(UnknownAgent, fmt.Sprintf("there is no subagent %q; choose one of %s", a.Agent, strings.Join(t.names(), ", "))))
	}
	depth := depthOf(call.AgentID) + 1
	if depth > t.cfg.MaxDepth {
		return fail(errs.New(DepthExceeded, fmt.Sprintf(
			"agent %q is itself a subagent at depth %d, and subagents may nest at most %d deep; do the task yourself", call.AgentID, depth-1, t.cfg.MaxDepth)))
	}
	// A subagent's own call runs inside its parent's slot: taking another
	// from the same pool could wait for a slot the parent holds, for ever.
	// Depth bounds how far that fans out.
	if depth == 1 {
		select {
		case t.slots <- struct{}{}:
		case <-ctx.Done():
			return cancelled(a.Agent)
		}
		defer func() { <-t.slots }()
	}

	parent, _ := t.agents.Get(call.AgentID)
	workspace := spec.Workspace
	if workspace == "" {
		workspace = call.Workspace
	}
	if spec.Agent == "" && spec.Provider == "" {
		if spec.Provider, spec.Model = inherited(parent, call.ID, spec.Model); spec.Provider == "" {
			return fail(errs.New(Refused, fmt.Sprintf("subagent %q names no agent (template) and no provider, and the calling agent %q has no model answer recorded for call %q to inherit its provider from; give the subagent a provider or agent under tools.agent", a.Agent, call.AgentID, call.ID)).WithReason("subagent/no-provider"))
		}
	}
	tctx, stop := stdctx.WithTimeout(ctx, t.cfg.Timeout)
	defer stop()
	s, err := t.sessions.Open(tctx, sessions.OpenOptions{
		Agent: templateOf(spec), Presets: spec.Presets, Workspace: workspace,
		SessionID: childSessionID(parent, call), Provider: spec.Provider, Model: spec.Model,
		Options: agentsOptions(spec),
		Source:  childSource(call),
	})
	if err != nil {
		return t.ended(ctx, tctx, a.Agent, errs.Wrap(Refused, err, fmt.Sprintf("subagent %q could not be started", a.Agent)))
	}
	childID := s.AgentID()
	depths.Store(childID, depth)
	started := Started{ParentAgentID: call.AgentID, CallID: call.ID, Name: a.Agent, Description: a.Description,
		SessionID: s.ID(), AgentID: childID, Depth: depth}
	announced := false
	defer func() {
		cctx, cancel := stdctx.WithTimeout(stdctx.WithoutCancel(ctx), closeTimeout)
		defer cancel()
		// Cancel first, so a turn still running ends rather than being
		// waited for; then close: agent disposed, session flushed.
		_ = s.Cancel(cctx)
		if err := s.Close(cctx); err != nil {
			parentLog(parent).Warn("closing a subagent's session failed", "session", s.ID(), "error", err)
		}
		depths.Delete(childID)
		if announced {
			_ = EventEnded.Emit(stdctx.Background(), parent.Context(), Ended{Started: started, Result: res})
		}
	}()
	// The forwarder takes the child's one answerer slot before anyone
	// hears of the child: a client attaching on subagent/started must not
	// take it first.
	detach, err := t.approval.Attach(childID, t.forward(call.AgentID, a.Agent))
	if err != nil {
		return fail(errs.Wrap(Refused, err, fmt.Sprintf("subagent %q: its approval questions cannot reach the parent", a.Agent)))
	}
	defer detach()
	if parent != nil {
		_ = EventStarted.Emit(stdctx.Background(), parent.Context(), started)
		announced = true
	}

	if _, err := s.Prompt(tctx, sessions.PromptRequest{RequestID: call.ID, Content: a.Prompt}); err != nil {
		if r, ok := sessions.RejectionOf(err); ok {
			return fail(errs.Wrap(Refused, err, fmt.Sprintf("subagent %q was not given the task: %s", a.Agent, r.Message)))
		}
		return t.ended(ctx, tctx, a.Agent, errs.Wrap(Refused, err, fmt.Sprintf("subagent %q was not given the task", a.Agent)))
	}
	// The task's turn ends in its recorded outcome; the answer is the
	// last assistant message of that turn.
	done, err := t.sessions.Wait(tctx, s.ID(), call.ID)
	if err != nil {
		return t.ended(ctx, tctx, a.Agent, err)
	}
	evs, err := t.sessions.History(tctx, s.ID(), max(done.Seq-1, 0))
	if err != nil {
		return t.ended(ctx, tctx, a.Agent, err)
	}
	return answer(evs, call.ID, a.Agent)
}

// ended answers a call whose child stopped early: the parent's turn was
// cancelled, the timeout passed, or err says what else happened.
func (t *Tool) ended(ctx, tctx stdctx.Context, name string, err error) (tools.Result, error) {
	switch {
	case ctx.Err() != nil:
		return cancelled(name)
	case tctx.Err() != nil:
		return fail(errs.New(TimedOut, fmt.Sprintf("subagent %q did not finish within %v; its turn was cancelled", name, t.cfg.Timeout)))
	}
	return fail(err)
}

func cancelled(name string) (tools.Result, error) {
	return fail(errs.New(Cancelled, fmt.Sprintf("cancelled: the turn was cancelled while subagent %q worked; it stopped without an answer", name)))
}

// answer reads the child's final answer: the last assistant message of the
// turn that our prompt started.
func answer(events []session.Event, requestID, name string) (tools.Result, error) {
	turn, text, found, cut := 0, "", false, false
	for _, e := range events {
		switch {
		case e.Type == session.UserMessage && e.RequestID == requestID:
			turn = e.Turn
		case turn == 0 || e.Turn != turn:
		case e.Type == session.AssistantMessage && e.Message != nil:
			text = e.Message.Content
		case e.Type == session.TurnEnd:
			found, cut = true, e.Reason == agentloop.ReasonMaxTokens
			if e.Reason != agentloop.ReasonCompleted && !cut {
				why := e.Error
				if why == "" {
					why = "the turn was " + e.Reason
				}
				return fail(errs.New(Failed, fmt.Sprintf("subagent %q failed: %s", name, why)))
			}
		}
	}
	if !found || strings.TrimSpace(text) == "" {
		return fail(errs.New(Failed, fmt.Sprintf("subagent %q ended its turn without an answer", name)))
	}
	if cut {
		text += fmt.Sprintf("\n\n[subagent %q reached its model's output limit: this answer may be cut short]", name)
	}
	return tools.Result{Content: text}, nil
}

// forward is the child's approval answerer: it asks the parent's, whose
// person then answers for the child. The parent's answerer sees the
// question as its own agent's, with the subagent named in its reason.
func (t *Tool) forward(parentID, name string) approval.Answerer {
	return func(ctx stdctx.Context, req approval.Request) (approval.Answer, error) {
		req.AgentID = parentID
		why := fmt.Sprintf("asked by subagent %q", name)
		if req.Reason != "" {
			why += ": " + req.Reason
		}
		req.Reason = why
		ans, err := t.approval.Ask(ctx, req)
		if errs.HasCode(err, approval.NoAnswerer) {
			// Nobody answers for the parent: the child's call fails
			// closed as the parent's would, not as a broken answerer.
			return approval.Answer{Choice: approval.Deny, Reason: err.Error()}, nil
		}
		return ans, err
	}
}

func (t *Tool) lookup(name string) (Agent, bool) {
	for _, a := range t.cfg.Agents {
		if a.Name == name {
			return a, true
		}
	}
	return Agent{}, false
}

func (t *Tool) names() []string {
	out := make([]string, len(t.cfg.Agents))
	for i, a := range t.cfg.Agents {
		out[i] = a.Name
	}
	sort.Strings(out)
	return out
}

// templateOf is the session's agent: the configured template, or the
// subagent's name when it names only a provider.
func templateOf(a Agent) string {
	if a.Agent != "" {
		return a.Agent
	}
	return a.Name
}

// agentsOptions are the base settings for openers that know no configured
// agents; the host's opener takes the template's and the overrides.
func agentsOptions(a Agent) agents.Options {
	return agents.Options{Provider: a.Provider, Model: a.Model, SystemPrompt: a.SystemPrompt}
}

var unsafeID = lazyregexp.New(`[^A-Za-z0-9._-]`)

// childSessionID derives the child's session id from its parent's session
// and the call id, so the link survives in the ids of persisted sessions:
// <parent session>.sub-<call id>-<8 random hex digits> (call ids repeat
// across steps with some providers). Empty, a fresh id, for a parent the
// registry does not know.
func childSessionID(parent agents.Agent, call tools.Call) string {
	if parent == nil || parent.Session() == nil {
		return ""
	}
	return session.ChildID(parent.Session().ID(), unsafeID.ReplaceAllString(call.ID, "_")+"-"+uuid.NewString()[:8])
}

// parentLog is where the tool reports what the model is not told.
func parentLog(parent agents.Agent) interface {
	Warn(msg string, args ...any)
} {
	if parent != nil {
		return parent.Context().Logger()
	}
	return nopLog{}
}

type nopLog struct{}

func (nopLog) Warn(string, ...any) {}
