// Package hooks is the hooks.command plugin: shell commands in the hooks
// format of Claude Code (event → matcher → commands), run at dsh's stages.
//
//   - UserPromptSubmit runs in agent-controller/admission: a block refuses
//     the message (reason hooks/blocked); context a hook adds goes into the
//     agent's system prompt, never into the message.
//   - PreToolUse runs in tools/approve: allow, deny or ask, and
//     updatedInput, which replaces the call's arguments (the pipeline
//     validates them again).
//   - PostToolUse wraps tools/execute: after the tool ran and succeeded, a
//     block's reason and additional context are appended to the result the
//     model reads. PostToolUseFailure does the same after a call whose
//     result is an error, as in Claude Code.
//   - Stop runs in agent/turn-continuation when the turn would end: a block
//     keeps the turn going with the reason handed to the model, at most
//     max_stop_continuations times per turn.
//   - SessionStart runs when the agent is created (agent/created), and
//     again with source "compact" after a compaction (compact/done); its
//     context goes into the system prompt. Its matchers select the source.
//   - PreCompact runs before a compaction (compact/started), SessionEnd
//     when the agent is disposed (agent/disposed); both for side effects.
//   - SubagentStart and SubagentStop run for tools.agent's children
//     (subagent/started; the child's turn continuation), which do not run
//     SessionStart, UserPromptSubmit, Stop or SessionEnd, as in Claude
//     Code.
//
// A hook gets the event as JSON on stdin and runs through
// internal/childproc, in the agent's workspace, in its own process group,
// with the minimal environment plus DSH_PROJECT_DIR and CLAUDE_PROJECT_DIR
// (the workspace), the settings files' "env" and the config's env. Exit code 2 blocks with stderr as
// the reason; exit 0 may print JSON decisions; anything else is logged and
// changes nothing. The hooks of one event run in parallel; when they
// disagree, deny wins over ask, and ask over allow.
//
// Matchers select tools by dsh's name or by the name Claude Code gives the
// same tool (bash/Bash, edit/Edit, write/Write, read/Read, glob/Glob,
// grep/Grep, list/LS, and mcp__<server>__<tool> for dsh's MCP tools
// <server>__<tool>), so existing hooks files work as they are. The input
// is written as Claude Code writes it: no HTML escapes, so a guard that
// greps its raw stdin for "> /path" or "&&" sees them.
package hooks

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"github.com/dsh-go/dsh/telemetry"
	"maps"
	"os"
	"strings"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// ID is the plugin's id (ids are namespaced, so not plain "hooks"),
// and the start of the Source of its verdicts.
const ID = "hooks.command"

// ReasonBlocked is the admission refusal reason of a UserPromptSubmit
// hook that blocks a message.
const ReasonBlocked = "hooks/blocked"

// Plugin is hooks.
var Plugin = plugin.Register(ID, "runs Claude Code style command hooks (hooks.json) at admission, approval, tool execution, turn end, compaction and agent creation and disposal",
	func(ctx *dshctx.Context, cfg Config) error {
		l, err := cfg.load()
		if err != nil {
			return err
		}
		for _, w := range l.warnings {
			ctx.Logger().Warn(w)
		}
		p := &hooks{cfg: cfg, byEvent: l.byEvent, fileEnv: l.env, log: ctx.Logger(), source: ID, state: map[string]*agentState{}}
		if tag := ctx.Tag(); tag != "" {
			p.source += "@" + tag
		}
		if reg, err := agents.Key.Get(ctx); err == nil {
			p.registry = reg
		}
		if err := protectFiles(ctx, cfg.Files); err != nil {
			return err
		}
		return p.mount(ctx)
	}, agents.Key, tools.Key, protect.Key)

// hooks is one mounted instance.
type hooks struct {
	cfg      Config
	byEvent  map[string][]compiled
	fileEnv  map[string]string // the files' "env" keys
	log      hclog.Logger
	source   string
	registry *agents.Registry

	mu    sync.Mutex
	state map[string]*agentState
}

// agentState is what the plugin keeps per agent between events.
type agentState struct {
	// start is what SessionStart hooks added and context what
	// UserPromptSubmit hooks added, both shown in the system prompt. start
	// is kept apart because SessionStart runs again after a compaction
	// and its new context replaces the old.
	start, context []string
	// stopTurn and stopCount count the continuations Stop hooks forced
	// in one turn.
	stopTurn, stopCount int
	// fed is how many steering messages of Stop feedback the loop has
	// yet to count: the step that reads one must not take it for
	// steering from outside, which would continue the turn by itself.
	fed int
	// stopRequested: a hook answered "continue": false; the turn ends
	// after the step in flight.
	stopRequested string
	// preContext is PreToolUse's additionalContext by call id, appended
	// to the call's result when it runs.
	preContext map[string][]string
	// subagentName is the configured name of a subagent (tools.agent's
	// child), which SubagentStart and SubagentStop matchers select.
	subagentName string
}

func (p *hooks) agent(id string) *agentState {
	s := p.state[id]
	if s == nil {
		s = &agentState{}
		p.state[id] = s
	}
	return s
}

// input is the JSON a hook reads on stdin: Claude Code's fields, plus
// dsh's own (dsh_*).
type input struct {
	SessionID      string          `json:"session_id"`
	Cwd            string          `json:"cwd"`
	HookEventName  string          `json:"hook_event_name"`
	PermissionMode string          `json:"permission_mode"`
	AgentID        string          `json:"dsh_agent_id"`
	ToolName       string          `json:"tool_name,omitempty"`
	DshToolName    string          `json:"dsh_tool_name,omitempty"`
	ToolInput      json.RawMessage `json:"tool_input,omitempty"`
	ToolUseID      string          `json:"tool_use_id,omitempty"`
	ToolResponse   map[string]any  `json:"tool_response,omitempty"`
	Error          *string         `json:"error,omitempty"`
	IsInterrupt    *bool           `json:"is_interrupt,omitempty"`
	Prompt         *string         `json:"prompt,omitempty"`
	StopHookActive *bool           `json:"stop_hook_active,omitempty"`
	// LastAssistantMessage is Stop's and SubagentStop's: the text of the
	// answer the turn would end with.
	LastAssistantMessage *string `json:"last_assistant_message,omitempty"`
	Source               string  `json:"source,omitempty"`
	// SubagentID and AgentType are SubagentStart's and SubagentStop's:
	// the subagent's agent id and its configured name.
	SubagentID string `json:"agent_id,omitempty"`
	AgentType  string `json:"agent_type,omitempty"`
	// Message and NotificationType are Notification's.
	Message          string `json:"message,omitempty"`
	NotificationType string `json:"notification_type,omitempty"`
	// Reason is SessionEnd's.
	Reason string `json:"reason,omitempty"`
	// Trigger and CustomInstructions are PreCompact's.
	Trigger            string  `json:"trigger,omitempty"`
	CustomInstructions *string `json:"custom_instructions,omitempty"`
}

// where says where an event happens: the agent, its session and
// workspace.
type where struct {
	agentID, sessionID, workspace string
}

// locate finds the session and workspace of an agent by id.
func (p *hooks) locate(agentID, workspace string) where {
	w := where{agentID: agentID, workspace: workspace}
	if p.registry != nil {
		if a, ok := p.registry.Get(agentID); ok {
			w = whereOf(a)
			if workspace != "" {
				w.workspace = workspace
			}
		}
	}
	if w.workspace == "" {
		w.workspace, _ = os.Getwd()
	}
	return w
}

// whereOf reads an agent's session and workspace.
func whereOf(a agents.Agent) where {
	w := where{agentID: a.ID()}
	if s := a.Session(); s != nil {
		w.sessionID = s.ID()
	}
	if ws, ok := a.(interface{ Workspace() string }); ok {
		w.workspace = ws.Workspace()
	}
	if w.workspace == "" {
		w.workspace, _ = os.Getwd()
	}
	return w
}

// fire runs the hooks of event whose matcher matches tool (the tool's
// name; SessionStart's source, which its matchers select in Claude Code;
// "" for events whose matchers are ignored) in parallel and returns their replies in config order. The same
// command listed twice runs once.
func (p *hooks) fire(ctx stdctx.Context, event, tool string, in input, w where) []reply {
	var todo []*compiled
	seen := map[string]bool{}
	for i := range p.byEvent[event] {
		h := &p.byEvent[event][i]
		if tool != "" && !h.match.matches(tool) || seen[h.command] {
			continue
		}
		seen[h.command] = true
		todo = append(todo, h)
	}
	if len(todo) == 0 {
		return nil
	}
	in.HookEventName, in.AgentID, in.SessionID, in.Cwd, in.PermissionMode = event, w.agentID, w.sessionID, w.workspace, p.permissionMode(ctx, w.agentID)
	in.ToolInput = plain(in.ToolInput)
	data, err := encode(in)
	if err != nil {
		p.log.Error("hooks: could not encode the hook input", "event", event, "error", err)
		return nil
	}
	vars := maps.Clone(p.fileEnv)
	if vars == nil {
		vars = map[string]string{}
	}
	maps.Copy(vars, p.cfg.Env)
	vars[childproc.ProjectDirEnv], vars["CLAUDE_PROJECT_DIR"] = w.workspace, w.workspace
	vars[childproc.HookEventEnv], vars[childproc.AgentIDEnv] = event, w.agentID
	e := env{vars: vars, passthrough: p.cfg.EnvPassthrough}
	replies := make([]reply, len(todo))
	var wg sync.WaitGroup
	for i, h := range todo {
		wg.Go(func() {
			replies[i] = interpret(h, runTraced(ctx, event, h, data, w.workspace, e, p.cfg.MaxOutputBytes))
		})
	}
	wg.Wait()
	log := telemetry.Logger(ctx, p.log)
	for _, r := range replies {
		if r.failed != "" && ctx.Err() == nil {
			log.Warn(fmt.Sprintf("%s hook %q (%s) %s", event, r.hook.command, r.hook.where, r.failed), "agent", w.agentID)
		}
		if len(r.ignored) > 0 {
			log.Warn(fmt.Sprintf("%s hook %q (%s) answered %s, which dsh does not act on; ignored", event, r.hook.command, r.hook.where, strings.Join(r.ignored, ", ")), "agent", w.agentID)
		}
		if r.systemMessage != "" {
			log.Info(fmt.Sprintf("%s hook %q: %s", event, r.hook.command, r.systemMessage), "agent", w.agentID)
		}
	}
	return replies
}

// reasons joins the reasons of the replies that pass keep.
func reasons(rs []reply, keep func(reply) bool) string {
	var parts []string
	for _, r := range rs {
		if keep(r) && r.reason != "" {
			parts = append(parts, r.reason)
		}
	}
	return strings.Join(parts, "; ")
}

// permissionMode is Claude Code's permission_mode for the agent: "plan"
// while tools.plan holds it in plan mode (a hook that refuses writes
// while planning reads it), else "default": dsh has policies, not
// Claude Code's other modes.
func (p *hooks) permissionMode(ctx stdctx.Context, agentID string) string {
	if p.registry == nil {
		return "default"
	}
	a, ok := p.registry.Get(agentID)
	if !ok {
		return "default"
	}
	st, err := sessions.EventPlan.Dispatch(ctx, a.Context(), sessions.PlanQuery{Agent: a, Request: sessions.PlanRequest{Op: sessions.PlanGet, By: ID}})
	if err == nil && st.Planning {
		return "plan"
	}
	return "default"
}
