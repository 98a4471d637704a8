// Package plan is the tools.plan plugin: plan mode enforced by the host,
// the plan as a typed artefact, and the todo list.
//
// # Plan mode
//
// While a session plans, the plugin's gate (tools.Gate, asked before the
// approval policies, whose refusal no policy, hook or answer lifts) refuses
// every call that is not read-only: write and edit, bash beyond
// permission.ReadOnlyCommand, MCP tools without readOnlyHint, any tool that
// does not declare tools.Tool.ReadOnly. The model is told it is planning
// and how to propose the plan.
//
// A session enters plan mode from its config (mode: plan, the built-in
// preset plan), or from a person (CLI /plan, the ACP mode plan, the API's
// plan op). It leaves it when a person says so, or when the model calls
// exit_plan_mode with its plan and the person attached to the agent allows
// it: the tool asks through the approval service whatever the policies
// would allow (tools.AskPerson), so a full-access mode does not let the
// model leave alone; only the operator's standing answers (dsh run --allow
// exit_plan_mode, --yolo) stand in for the person. A denied exit, or
// nobody to ask, keeps plan mode.
//
// # The plan and the todos
//
// exit_plan_mode's plan (Markdown) is stored as proposed before anyone is
// asked, then approved or rejected; a person may edit it. The todo tool
// writes the whole todo list. Every change is a plan/updated event holding
// the whole state, appended by the agent's driver; a resumed session
// starts from the last one.
package plan

import (
	stdctx "context"
	"fmt"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/waterfall"
)

// ID is the plugin's id.
const ID = "tools.plan"

// Tool names.
const (
	ExitTool = "exit_plan_mode"
	TodoTool = "todo"
)

// PlanPrompt ends the system prompt while the session plans.
const PlanPrompt = "You are in plan mode: the host refuses every tool call that could change something (writes, edits, " +
	"bash beyond reading commands, tools not marked read-only). Explore with the read-only tools, keep a todo list if it helps, " +
	"then call " + ExitTool + " with your plan in Markdown. The user approves it or asks for changes; only after approval do you make them."

// ModePlan is the Config.Mode of a session that starts in plan mode.
const ModePlan = "plan"

// Config is the plugin's configuration.
type Config struct {
	// Mode is how a new session starts: plan, or "" (not planning).
	Mode string `koanf:"mode" json:"mode,omitempty"`
	// Todos registers the todo tool (default true).
	Todos *bool `koanf:"todos" json:"todos,omitempty"`
}

// Validate names a mode that is not one.
func (c Config) Validate() error {
	if c.Mode != "" && c.Mode != ModePlan {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("mode: %q is not a mode of tools.plan; use plan, or leave it out to start outside plan mode", c.Mode))
	}
	return nil
}

// Plugin is tools.plan.
var Plugin = plugin.Register(ID, "plan mode the host enforces (only read-only tools run until a person approves the plan), and a todo list", func(ctx *dshctx.Context, cfg Config) error {
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return err
	}
	p := &planner{cfg: cfg, states: map[string]*session.PlanState{}}
	if err := tools.GateKey.Provide(ctx, p); err != nil {
		return err
	}
	if err := svc.Register(ctx, exitTool(p)); err != nil {
		return err
	}
	if cfg.Todos == nil || *cfg.Todos {
		if err := svc.Register(ctx, todoTool(p)); err != nil {
			return err
		}
	}
	if _, err := agents.EventCreated.On(ctx, p.created); err != nil {
		return err
	}
	if _, err := agents.EventDisposed.On(ctx, func(_ stdctx.Context, a agents.Agent) error {
		p.mu.Lock()
		delete(p.states, a.ID())
		p.mu.Unlock()
		p.scopes.Delete(a.ID())
		return nil
	}); err != nil {
		return err
	}
	// While the agent plans, its system prompt says so: the model learns
	// the rules before its first refused call, not from it.
	if _, err := systemprompt.EventAssemble.On(ctx, func(ctx stdctx.Context, a systemprompt.Assembly, next waterfall.Next[systemprompt.Assembly, string]) (string, error) {
		text, err := next.Call(ctx, a)
		if err != nil || !p.state(a.AgentID).Planning {
			return text, err
		}
		return text + "\n\n" + PlanPrompt, nil
	}); err != nil {
		return err
	}
	_, err = sessions.EventPlan.On(ctx, func(ctx stdctx.Context, q sessions.PlanQuery, _ sessions.PlanNext) (session.PlanState, error) {
		return p.control(ctx, q)
	})
	return err
}, tools.Key)

// planner is one plugin instance: the plan state of each agent it serves.
type planner struct {
	cfg Config
	// order serializes changes with their records; mu guards states.
	order  sync.Mutex
	mu     sync.Mutex
	states map[string]*session.PlanState
	// scopes are the agents' scopes, where their records are emitted.
	scopes sync.Map // agent id → *dshctx.Context
}

// created restores an agent's state from its session's last plan/updated
// event, or starts it as the config says (and records that).
func (p *planner) created(ctx stdctx.Context, a agents.Agent) error {
	p.scopes.Store(a.ID(), a.Context())
	var last *session.PlanState
	for _, e := range a.Session().Events(1) {
		if e.Type == session.PlanUpdated && e.Plan != nil {
			last = e.Plan
		}
	}
	if last != nil {
		st := last.Clone()
		p.mu.Lock()
		p.states[a.ID()] = &st
		p.mu.Unlock()
		return nil
	}
	st := &session.PlanState{Planning: p.cfg.Mode == ModePlan}
	p.mu.Lock()
	p.states[a.ID()] = st
	p.mu.Unlock()
	if st.Planning {
		return p.change(ctx, a.ID(), func(s *session.PlanState) error {
			s.Change, s.By = "entered", "config"
			return nil
		})
	}
	return nil
}

// state returns a copy of agentID's state.
func (p *planner) state(agentID string) session.PlanState {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.states[agentID]; st != nil {
		return st.Clone()
	}
	return session.PlanState{Planning: p.cfg.Mode == ModePlan}
}

// change applies f to agentID's state and records the result.
func (p *planner) change(ctx stdctx.Context, agentID string, f func(*session.PlanState) error) error {
	// Changes are recorded in the order they are made, so the last
	// plan/updated event of the log is the state a resume must start from.
	p.order.Lock()
	defer p.order.Unlock()
	p.mu.Lock()
	st := p.states[agentID]
	if st == nil {
		st = &session.PlanState{Planning: p.cfg.Mode == ModePlan}
		p.states[agentID] = st
	}
	next := st.Clone()
	if err := f(&next); err != nil {
		p.mu.Unlock()
		return err
	}
	*st = next
	rec := next.Clone()
	p.mu.Unlock()
	scope, ok := p.scopes.Load(agentID)
	if !ok {
		return errs.New(agents.AgentNotFound, fmt.Sprintf("tools.plan: agent %q is not known here, so its plan change was not recorded", agentID))
	}
	return session.EventRecord.Emit(ctx, scope.(*dshctx.Context), session.Record{AgentID: agentID,
		Event: session.Event{Type: session.PlanUpdated, Plan: &rec}})
}

// Refuse is the gate: in plan mode, a call that is not read-only.
func (p *planner) Refuse(_ stdctx.Context, call tools.Call, t *tools.Tool) (string, string) {
	if !p.state(call.AgentID).Planning {
		if call.Name == ExitTool && t != nil && t.Name == ExitTool {
			return "the session is not in plan mode, so there is nothing to leave; go on with the work.", "plan mode"
		}
		return "", ""
	}
	ok, why := tools.IsReadOnly(t, call)
	if ok {
		return "", ""
	}
	return fmt.Sprintf("the session is in plan mode, where only tools that read run (%s). "+
		"You are planning: explore with the read-only tools (read, list, glob, grep, read-only bash), then call %s "+
		"with the plan in Markdown. Once the user approves it, plan mode ends and you make the changes.", why, ExitTool), "plan mode"
}

// control runs a person's plan operation.
func (p *planner) control(ctx stdctx.Context, q sessions.PlanQuery) (session.PlanState, error) {
	id, by := q.Agent.ID(), q.Request.By
	if by == "" {
		by = "person"
	}
	var err error
	switch q.Request.Op {
	case sessions.PlanGet:
		return p.state(id), nil
	case sessions.PlanEnter:
		err = p.change(ctx, id, func(s *session.PlanState) error {
			s.Planning, s.Change, s.By = true, "entered", by
			return nil
		})
	case sessions.PlanLeave:
		err = p.change(ctx, id, func(s *session.PlanState) error {
			s.Planning, s.Change, s.By = false, "left", by
			return nil
		})
	case sessions.PlanEdit:
		if q.Request.Plan == "" {
			return session.PlanState{}, errs.New(errs.InvalidArgument, "plan edit: the new plan is empty; send the whole plan text (Markdown)")
		}
		err = p.change(ctx, id, func(s *session.PlanState) error {
			s.Plan, s.PlanStatus, s.Change, s.By = q.Request.Plan, "edited", "edited", by
			return nil
		})
	default:
		return session.PlanState{}, sessions.ValidPlanOp(q.Request)
	}
	if err != nil {
		return session.PlanState{}, err
	}
	return p.state(id), nil
}
