package agentloop

import (
	stdctx "context"
	"errors"
	"fmt"
	"github.com/dsh-go/dsh/telemetry"
	"path/filepath"

	"github.com/dsh-go/dsh/errs"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/tools"
)

// DefaultMaxParallelTools caps the parallel-safe tool calls of one step
// running at once when neither the loop's config nor the agent says.
const DefaultMaxParallelTools = tools.DefaultMaxParallel

// runTools runs the tool calls of one step through the tools scheduler and
// returns how many ran to a result; a call refused by a bound of the
// agent's limits counts as one, as a call with invalid arguments does, so
// the model gets to react to the refusal.
//
// The calls run on worker goroutines, but the session is written only
// here, on the driver, as its event order requires: a call's tool/call is
// appended when the call starts (calls start in the model's order), and
// the results are appended in the model's order, whatever order the calls
// finish in. Every call gets exactly one tool/result after its assistant
// message, so the history stays valid for every provider, also when the
// step is aborted or a tool panics.
func (a *ReactLoopAgent) runTools(ctx stdctx.Context, turn, step int, calls []llm.ToolCall) (executed int, err error) {
	if len(calls) == 0 {
		return 0, nil
	}
	rec := telemetry.Detach(stdctx.Background(), ctx)
	refused := a.refuseOverLimits(calls)
	// answer records the results of the refused calls before index i, so
	// results stay in the model's order around the calls that run.
	answered := 0
	answer := func(i int) {
		for ; answered < i; answered++ {
			if why := refused[answered]; why != "" {
				// Answered like a call whose arguments were not valid
				// JSON: the model hears why and the turn goes on.
				executed++
				a.sess.Append(rec, session.Event{Type: session.ToolResult, Turn: turn, Step: step, Message: &llm.Message{
					Role: llm.RoleTool, ToolCallID: calls[answered].ID, Content: why, IsError: true,
				}})
			}
		}
	}
	defer answer(len(calls))
	run := make([]int, 0, len(calls)) // indexes of the calls that may run
	batch := make([]tools.Call, 0, len(calls))
	for i, c := range calls {
		if refused[i] == "" {
			run = append(run, i)
			batch = append(batch, tools.Call{AgentID: a.id, ID: c.ID, Name: c.Name, Arguments: rawArgs(c.Arguments), Workspace: a.workspace, Unattended: a.unattended, Sources: a.sources})
		}
	}
	if len(batch) == 0 {
		return executed, nil
	}
	limit := a.opts.MaxParallelTools
	if limit <= 0 {
		limit = a.loop.cfg.MaxParallelTools
	}
	// The pen is put down while the calls run, and taken up to write
	// each call's start and result, so the outcome writer may append
	// while a tool works (see writeOutcomes).
	<-a.pen
	defer func() { a.pen <- struct{}{} }()
	err = a.loop.tools.Run(ctx, a.scope, batch, tools.Schedule{
		MaxParallel: limit,
		Start: func(j int) bool {
			a.pen <- struct{}{}
			defer func() { <-a.pen }()
			// Aborted while a tool or the provider finished anyway: no
			// further call starts; each is still answered.
			if a.checkStop() != "" {
				return false
			}
			c := calls[run[j]]
			a.sess.Append(rec, session.Event{Type: session.ToolCall, Turn: turn, Step: step, ToolCall: &c})
			// A call is durable, with its assistant message and the
			// results before it, before it runs: a crash while it runs
			// leaves a log that names it, which a resume answers as
			// interrupted, and live clients hear it start.
			a.flush(rec)
			// A fenced checkpoint aborted the turn: this copy no longer
			// owns the session, so the call does not run.
			return a.checkStop() == ""
		},
		Done: func(j int, o tools.Outcome) {
			a.pen <- struct{}{}
			defer func() { <-a.pen }()
			i := run[j]
			answer(i)
			answered = i + 1
			content, isError := o.Result.Content, o.Result.IsError
			if o.Err != nil || !o.Ran {
				content, isError = a.unanswered(o), true
			} else {
				executed++
			}
			msg := llm.Message{Role: llm.RoleTool, ToolCallID: calls[i].ID, Content: content, IsError: isError}
			if o.Ran && o.Err == nil && len(o.Result.Parts) > 0 {
				msg = a.toolParts(msg, o.Result.Parts)
			}
			msg = a.outOfLine(msg)
			// The call's approval record (and its answer's) come before
			// its result.
			a.recordDecisions(turn, step)
			a.sess.Append(rec, session.Event{Type: session.ToolResult, Turn: turn, Step: step, Message: &msg})
		},
	})
	return executed, err
}

// refuseOverLimits says, by index, which calls of a step do not run and
// why: those the model service refused while reading the reply (arguments
// over the cap, one call too many), any past max_tool_calls, and the
// subagent calls past max_subagent_calls. Each subagent is a whole agent
// with its own model calls; one reply must not start hundreds.
func (a *ReactLoopAgent) refuseOverLimits(calls []llm.ToolCall) []string {
	l := a.opts.Limits.WithDefaults()
	refused := make([]string, len(calls))
	spawned := 0
	for i, c := range calls {
		switch {
		case c.Refused != "":
			refused[i] = c.Refused
		case i >= l.MaxToolCalls:
			refused[i] = fmt.Sprintf("not executed: the reply asked for %d tool calls in one step, over the limit of %d (max_tool_calls); make fewer calls per step", len(calls), l.MaxToolCalls)
		default:
			if t := a.loop.tools.Lookup(a.scope, c.Name); t != nil && t.Spawns {
				spawned++
				if spawned > l.MaxSubagentCalls {
					refused[i] = fmt.Sprintf("not executed: the reply starts more than %d subagents in one step (max_subagent_calls); start at most %d per step and wait for their results", l.MaxSubagentCalls, l.MaxSubagentCalls)
				}
			}
		}
	}
	return refused
}

// unanswered is the result the model is told for a call that never
// started or ended without a result.
func (a *ReactLoopAgent) unanswered(o tools.Outcome) string {
	r := a.checkStop()
	switch {
	case !o.Ran && r != "":
		return "not executed: the turn was " + r
	case !o.Ran:
		return "not executed: the turn ended"
	case errs.HasCode(o.Err, tools.NotApproved) && r != "":
		return "not executed: the turn was " + r + " while this call waited for approval; it did not run"
	case errs.HasCode(o.Err, tools.NotApproved):
		return "not executed: the turn ended while this call waited for approval; it did not run"
	case r != "":
		return "interrupted: the turn was " + r + " while this call ran; it may have partly run"
	case errors.Is(o.Err, stdctx.Canceled) || errors.Is(o.Err, stdctx.DeadlineExceeded):
		return "interrupted: another call of this step failed and the turn ended while this call ran; it may have partly run"
	}
	return "failed: the turn ended: " + o.Err.Error()
}

// workspace resolves an agent's workspace option: empty means the
// directory the process was started in, and a relative path is taken from
// there, so tools always get an absolute path.
func workspace(id, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf(
			"agent %q: the workspace %q cannot be made absolute; set workspace to an absolute path", id, dir))
	}
	return abs, nil
}
