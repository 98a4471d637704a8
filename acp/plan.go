package acp

import (
	stdctx "context"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// Plan mode over ACP: the mode plan is the session's plan mode (tools.plan),
// which the host enforces whoever switches it; the editor's mode follows
// the session's state (a preset that starts planning, an approved exit),
// and the todo list is sent as ACP plan updates.

// switchPlan enters plan mode when the editor picks the mode plan, and
// leaves it when the editor picks another mode from plan: a person's
// choice, which is the approval leaving needs.
func (st *conv) switchPlan(ctx stdctx.Context, mode string) error {
	cur := st.mode.get()
	switch {
	case mode == ModePlan && cur != ModePlan:
		_, err := st.srv.opts.Sessions.Plan(ctx, string(st.id), sessions.PlanRequest{Op: sessions.PlanEnter, By: "acp"})
		return err
	case mode != ModePlan && cur == ModePlan:
		_, err := st.srv.opts.Sessions.Plan(ctx, string(st.id), sessions.PlanRequest{Op: sessions.PlanLeave, By: "acp"})
		if errs.HasCode(err, sessions.NoPlanMode) {
			return nil // nothing to leave
		}
		return err
	}
	return nil
}

// planModeAtOpen reconciles the editor's mode with the session's plan
// state as it opens: a session that plans (a preset, a resumed log) shows
// the mode plan; a session opened in the mode plan enters plan mode.
func (st *conv) planModeAtOpen(ctx stdctx.Context) {
	op := sessions.PlanGet
	if st.mode.get() == ModePlan {
		op = sessions.PlanEnter
	}
	ps, err := st.srv.opts.Sessions.Plan(ctx, string(st.id), sessions.PlanRequest{Op: op, By: "acp"})
	st.mu.Lock()
	st.planning = err == nil || !errs.HasCode(err, sessions.NoPlanMode)
	st.mu.Unlock()
	if err != nil {
		if st.mode.get() == ModePlan {
			st.srv.log.Warn("the editor asked for plan mode, which this agent does not have; the mode acts as workspace-write", "session", st.id, "error", err)
		}
		return
	}
	if ps.Planning && st.mode.get() != ModePlan {
		st.mode.set(ModePlan)
	}
	if len(ps.Todos) > 0 {
		st.send(planUpdate(ps.Todos))
	}
}

// planUpdated shows a plan/updated event: the todos as an ACP plan, a
// proposed or edited plan as a message, and the mode when plan mode began
// or ended.
func (st *conv) planUpdated(ps session.PlanState, history bool) {
	if ps.Change == "todos" || history && len(ps.Todos) > 0 {
		st.send(planUpdate(ps.Todos))
	}
	if history {
		return
	}
	switch ps.Change {
	case "proposed", "edited":
		st.sendText("agent_message_chunk", "\n\n**Plan ("+ps.PlanStatus+")**\n\n"+ps.Plan+"\n")
	}
	cur := st.mode.get()
	next := cur
	switch {
	case ps.Planning && cur != ModePlan:
		next = ModePlan
	case !ps.Planning && cur == ModePlan:
		next = ModeWorkspaceWrite
	}
	if next != cur {
		st.mode.set(next)
		st.send(acp.SessionUpdate{CurrentModeUpdate: &acp.SessionCurrentModeUpdate{CurrentModeId: acp.SessionModeId(next), SessionUpdate: "current_mode_update"}})
	}
}

// modes is the session's mode state: plan is offered when its agent has
// plan mode.
func (st *conv) modes() *acp.SessionModeState {
	st.mu.Lock()
	planning := st.planning
	st.mu.Unlock()
	s := modeState(st.mode.get())
	if !planning {
		s.AvailableModes = s.AvailableModes[:len(s.AvailableModes)-1]
	}
	return s
}

// planUpdate is the todo list as an ACP plan: every entry, each time.
func planUpdate(todos []session.Todo) acp.SessionUpdate {
	entries := make([]acp.PlanEntry, 0, len(todos))
	for _, t := range todos {
		status := acp.PlanEntryStatusPending
		switch t.Status {
		case session.TodoInProgress:
			status = acp.PlanEntryStatusInProgress
		case session.TodoCompleted:
			status = acp.PlanEntryStatusCompleted
		}
		entries = append(entries, acp.PlanEntry{Content: t.Text, Priority: acp.PlanEntryPriorityMedium, Status: status})
	}
	return acp.SessionUpdate{Plan: &acp.SessionUpdatePlan{Entries: entries, SessionUpdate: "plan"}}
}
