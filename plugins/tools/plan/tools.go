package plan

import (
	"bytes"
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// maxPlan bounds a plan's text.
const maxPlan = 64 << 10

var exitSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{`+
	`"plan":{"type":"string","minLength":1,"maxLength":%d,"description":"The plan, in Markdown: what you will change, where, and how you will check it"}},`+
	`"required":["plan"],"additionalProperties":false}`, maxPlan))

// exitTool is exit_plan_mode: the model proposes its plan and asks to
// leave plan mode. The plan is stored as proposed, then the person attached
// to the agent is asked through the approval service (tools.AskPerson),
// whatever the policies allow: a full-access mode or --allow of every tool
// does not let the model leave alone. Only an allow ends plan mode.
func exitTool(p *planner) tools.Tool {
	t := tools.Tool{
		Name: ExitTool,
		Description: "Propose your plan and ask the user to leave plan mode. Call it when you are in plan mode (tools that write are refused) " +
			"and have explored enough to say what you will do. The user reads the plan and approves or rejects it; on approval plan mode " +
			"ends and you carry the plan out. If rejected, stay in plan mode and revise it as the user says.",
		Parameters: exitSchema,
		// It writes nothing but the session's own plan: the gate lets it
		// through, and the person decides whether plan mode ends.
		ReadOnly: true,
		// The person approves the plan itself: they see all of it.
		Summary: planSummary,
	}
	t.Execute = func(ctx stdctx.Context, call tools.Call) (tools.Result, error) { return p.exit(ctx, call, &t) }
	return t
}

func planSummary(call tools.Call) string {
	var args struct {
		Plan string `json:"plan"`
	}
	if json.Unmarshal(call.Arguments, &args) != nil || args.Plan == "" {
		return ExitTool
	}
	return "leave plan mode and carry out this plan?\n\n" + args.Plan
}

// exit stores the plan, asks the person, and ends plan mode if they allow.
func (p *planner) exit(ctx stdctx.Context, call tools.Call, t *tools.Tool) (tools.Result, error) {
	var args struct {
		Plan string `json:"plan"`
	}
	if err := json.Unmarshal(call.Arguments, &args); err != nil {
		return tools.Result{}, fmt.Errorf("the arguments are not {\"plan\": \"<markdown>\"}: %v", err)
	}
	if !p.state(call.AgentID).Planning {
		return tools.Result{Content: "The session is not in plan mode: there is nothing to leave. Go on with the work.", IsError: true}, nil
	}
	if err := p.change(ctx, call.AgentID, func(s *session.PlanState) error {
		s.Plan, s.PlanStatus, s.Change, s.By = args.Plan, "proposed", "proposed", "model"
		return nil
	}); err != nil {
		return tools.Result{}, err
	}
	scope, ok := p.scopes.Load(call.AgentID)
	if !ok {
		return tools.Result{}, fmt.Errorf("tools.plan does not know agent %q", call.AgentID)
	}
	sum := sha256.Sum256([]byte(args.Plan))
	// "Allow for this session" covers this plan's text only: a later
	// plan is asked about again.
	v := tools.Verdict{Source: ID, Reason: "the model asks to leave plan mode and carry out its plan",
		Pattern: "plan " + hex.EncodeToString(sum[:8])}
	r, allowed, err := tools.AskPerson(ctx, scope.(*dshctx.Context), call, t, v)
	if err != nil {
		return tools.Result{}, err
	}
	if !allowed {
		if err := p.change(ctx, call.AgentID, func(s *session.PlanState) error {
			s.PlanStatus, s.Change, s.By = "rejected", "rejected", "person"
			return nil
		}); err != nil {
			return tools.Result{}, err
		}
		r.Content += " The session stays in plan mode: revise the plan and propose it again."
		return r, nil
	}
	var plan string
	if err := p.change(ctx, call.AgentID, func(s *session.PlanState) error {
		plan = s.Plan
		s.Planning, s.PlanStatus, s.Change, s.By = false, "approved", "approved", "person"
		return nil
	}); err != nil {
		return tools.Result{}, err
	}
	if plan != args.Plan {
		return tools.Result{Content: "The user approved the plan as they edited it, and plan mode is over. Carry out this plan now:\n\n" + plan}, nil
	}
	return tools.Result{Content: "The user approved the plan, and plan mode is over. Carry it out now."}, nil
}

// maxTodos bounds the todo list.
const maxTodos = 100

var todoSchema = json.RawMessage(fmt.Sprintf(`{"type":"object","properties":{"todos":{"type":"array","maxItems":%d,`+
	`"description":"The whole todo list, in order; it replaces the previous one",`+
	`"items":{"type":"object","properties":{`+
	`"id":{"type":"string","minLength":1,"maxLength":64,"description":"A short id, stable across updates"},`+
	`"text":{"type":"string","minLength":1,"maxLength":500,"description":"What to do"},`+
	`"status":{"type":"string","enum":["pending","in_progress","completed"]}},`+
	`"required":["id","text","status"],"additionalProperties":false}}},`+
	`"required":["todos"],"additionalProperties":false}`, maxTodos))

// todoTool writes the session's todo list.
func todoTool(p *planner) tools.Tool {
	return tools.Tool{
		Name: TodoTool,
		Description: "Write your todo list for this task: send the whole list each time (it replaces the previous one), " +
			"each item with an id, its text and a status (pending, in_progress, completed). Keep one item in_progress at a time " +
			"and mark items completed as soon as they are done. The user sees the list live.",
		Parameters: todoSchema,
		// It changes only the session's own list: plan mode lets it run.
		ReadOnly: true,
		Execute:  p.todo,
	}
}

func (p *planner) todo(ctx stdctx.Context, call tools.Call) (tools.Result, error) {
	var args struct {
		Todos []session.Todo `json:"todos"`
	}
	d := json.NewDecoder(bytes.NewReader(call.Arguments))
	d.DisallowUnknownFields()
	if err := d.Decode(&args); err != nil {
		return tools.Result{}, fmt.Errorf("the arguments are not {\"todos\": [{\"id\", \"text\", \"status\"}, ...]}: %v", err)
	}
	seen := map[string]bool{}
	for i, t := range args.Todos {
		if seen[t.ID] {
			return tools.Result{Content: fmt.Sprintf("todos[%d]: the id %q is used twice; give each item its own id. The list was not changed.", i, t.ID), IsError: true}, nil
		}
		seen[t.ID] = true
	}
	if err := p.change(ctx, call.AgentID, func(s *session.PlanState) error {
		s.Todos, s.Change, s.By = args.Todos, "todos", "model"
		return nil
	}); err != nil {
		return tools.Result{}, err
	}
	return tools.Result{Content: Render(args.Todos)}, nil
}

// Render writes a todo list for people and the model: one line per item,
// [x] done, [>] in progress, [ ] pending, and a count.
func Render(todos []session.Todo) string {
	if len(todos) == 0 {
		return "The todo list is empty."
	}
	var b strings.Builder
	done := 0
	for _, t := range todos {
		mark := "[ ]"
		switch t.Status {
		case session.TodoCompleted:
			mark = "[x]"
			done++
		case session.TodoInProgress:
			mark = "[>]"
		}
		fmt.Fprintf(&b, "%s %s  (%s)\n", mark, t.Text, t.ID)
	}
	fmt.Fprintf(&b, "%d of %d done", done, len(todos))
	return b.String()
}
