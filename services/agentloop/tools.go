package agentloop

import (
	stdctx "context"
	"errors"
	"fmt"
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
// returns how many ran to a result.
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
	rec := stdctx.Background()
	batch := make([]tools.Call, len(calls))
	for i, c := range calls {
		batch[i] = tools.Call{AgentID: a.id, ID: c.ID, Name: c.Name, Arguments: rawArgs(c.Arguments), Workspace: a.workspace, Unattended: a.unattended}
	}
	limit := a.opts.MaxParallelTools
	if limit <= 0 {
		limit = a.loop.cfg.MaxParallelTools
	}
	err = a.loop.tools.Run(ctx, a.scope, batch, tools.Schedule{
		MaxParallel: limit,
		Start: func(i int) bool {
			// Aborted while a tool or the provider finished anyway: no
			// further call starts; each is still answered.
			if a.checkStop() != "" {
				return false
			}
			c := calls[i]
			a.sess.Append(rec, session.Event{Type: session.ToolCall, Turn: turn, Step: step, ToolCall: &c})
			// A call is durable, with its assistant message and the
			// results before it, before it runs: a crash while it runs
			// leaves a log that names it, which a resume answers as
			// interrupted, and live clients hear it start.
			a.flush(rec)
			return true
		},
		Done: func(i int, o tools.Outcome) {
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
			a.sess.Append(rec, session.Event{Type: session.ToolResult, Turn: turn, Step: step, Message: &msg})
		},
	})
	return executed, err
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
