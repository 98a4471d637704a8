package sessions

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// GoalStatusTool is the name of the tool through which the model reports
// on its goal. It is mounted in the agent's scope only while the goal is
// active, so a model without a goal never sees it.
const GoalStatusTool = "goal_status"

// goalStatusSchema is closed like every built-in tool's.
var goalStatusSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"status":{"type":"string","enum":["complete","blocked"],"description":"complete when the goal is achieved; blocked when you cannot go on without help"},` +
	`"reason":{"type":"string","maxLength":2000,"description":"a short summary of what was achieved, or what you need to go on"}},` +
	`"required":["status","reason"],"additionalProperties":false}`)

// goalTool mounts goal_status for one driver.
type goalTool struct{ d *goalDriver }

var goalToolPlugin = dshctx.Define("goalStatus", func(ctx *dshctx.Context, t goalTool) error {
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return err
	}
	return svc.Register(ctx, tools.Tool{
		Name: GoalStatusTool,
		Description: "Reports on the goal you are working toward across turns: status complete when it is achieved, " +
			"blocked when you cannot make progress without help. Until you report, dsh keeps asking you to continue.",
		Parameters: goalStatusSchema,
		Execute:    t.run,
	})
}, tools.Key)

func (t goalTool) run(_ stdctx.Context, c tools.Call) (tools.Result, error) {
	var args struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	d := json.NewDecoder(bytes.NewReader(c.Arguments))
	d.DisallowUnknownFields()
	if err := d.Decode(&args); err != nil {
		return tools.Result{}, fmt.Errorf("the arguments are not {\"status\": \"complete\"|\"blocked\", \"reason\": \"…\"}: %v", err)
	}
	if strings.TrimSpace(args.Reason) == "" {
		return tools.Result{}, fmt.Errorf("reason is empty; say what was achieved, or what you need to go on")
	}
	g, err := t.d.report(args.Status, strings.TrimSpace(args.Reason))
	if err != nil {
		return tools.Result{}, err
	}
	if g.State == session.GoalComplete {
		return tools.Result{Content: "The goal is marked complete; no more continuations will be sent."}, nil
	}
	return tools.Result{Content: "The goal is marked blocked; no more continuations will be sent until a person resumes it."}, nil
}

// syncTool mounts goal_status while the goal is active and the session
// open, and unmounts it otherwise. Any goroutine may call it; calls take
// turns and each leaves the tool as the state is at that moment.
func (d *goalDriver) syncTool() {
	d.toolMu.Lock()
	defer d.toolMu.Unlock()
	d.mu.Lock()
	want := d.cur.State == session.GoalActive && !d.closed
	d.mu.Unlock()
	switch {
	case want && d.tool == nil:
		f, err := d.s.handle.Agent.Context().Plugin(goalToolPlugin, goalTool{d})
		if err != nil {
			d.s.handle.Agent.Context().Logger().Warn("mounting the goal_status tool failed", "session", d.s.id, "error", err)
			return
		}
		d.tool = f
	case !want && d.tool != nil:
		if err := d.tool.Dispose(stdctx.Background()); err != nil {
			d.s.handle.Agent.Context().Logger().Warn("unmounting the goal_status tool failed", "session", d.s.id, "error", err)
		}
		d.tool = nil
	}
}
