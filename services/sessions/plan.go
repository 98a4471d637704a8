package sessions

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
)

// NoPlanMode: the session's agent has no plan mode (tools.plan is not in
// its presets), so its plan cannot be read or changed.
const NoPlanMode errs.Code = "SESSION_NO_PLAN_MODE"

// Plan operations a person sends through an entry point.
const (
	// PlanGet reads the state.
	PlanGet = "get"
	// PlanEnter puts the session in plan mode.
	PlanEnter = "enter"
	// PlanLeave ends plan mode: a person asked for it, which is the
	// approval the model's exit_plan_mode needs.
	PlanLeave = "leave"
	// PlanEdit replaces the plan's text with PlanRequest.Plan.
	PlanEdit = "edit"
)

// PlanRequest is a person's plan operation on a session.
type PlanRequest struct {
	// Op is get, enter, leave or edit.
	Op string `json:"op"`
	// Plan is the new plan of an edit, Markdown.
	Plan string `json:"plan,omitempty"`
	// By names who asks (the entry point: cli, acp, api), for the log.
	By string `json:"by,omitempty"`
}

// PlanQuery is the payload of session/plan.
type PlanQuery struct {
	Agent   agents.Agent
	Request PlanRequest
}

// EventPlan carries a plan operation to the session's agent scope, where
// tools.plan answers it with the state after the operation. Without it the
// operation fails with NoPlanMode.
var EventPlan = waterfall.New("session/plan", func(_ stdctx.Context, q PlanQuery) (session.PlanState, error) {
	return session.PlanState{}, errs.New(NoPlanMode, fmt.Sprintf(
		"agent %q has no plan mode: add the tools.plan plugin to its presets (or use the built-in preset plan)", q.Agent.ID()))
})

// PlanNext passes a plan operation on to the rest of session/plan.
type PlanNext = waterfall.Next[PlanQuery, session.PlanState]

// ValidPlanOp refuses an operation that is not one of the four, saying
// which are.
func ValidPlanOp(r PlanRequest) error {
	switch r.Op {
	case PlanGet, PlanEnter, PlanLeave, PlanEdit:
		return nil
	}
	return errs.New(errs.InvalidArgument, fmt.Sprintf("plan op %q is not one of get, enter, leave, edit", r.Op))
}

// Plan runs a plan operation on open session id and returns its plan state.
func (c *Controller) Plan(ctx stdctx.Context, id string, r PlanRequest) (session.PlanState, error) {
	if err := ValidPlanOp(r); err != nil {
		return session.PlanState{}, err
	}
	s, err := c.session(id)
	if err != nil {
		return session.PlanState{}, err
	}
	agent := s.handle.Agent
	return EventPlan.Dispatch(ctx, agent.Context(), PlanQuery{Agent: agent, Request: r})
}
