package acp

import (
	"errors"
	"strings"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/slashcmd"
	"github.com/dsh-go/dsh/services/sessions"
)

// sessionCommands are the server's commands that act on the session
// rather than reach the model: the editor sends them as prompts, and the
// server answers each with an agent message and end_turn without
// delivering anything. A prompt command file of the same name is left
// out of the list (commands.go): these would shadow it.
var sessionCommands = []acp.AvailableCommand{
	{Name: "rewind", Description: "take the workspace and/or conversation back to before a turn or step; alone, list them",
		Input: &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Hint: slashcmd.RewindUsage}}},
	{Name: "redo", Description: "undo the last rewind"},
	{Name: "goal", Description: "work toward a goal across turns until done; alone, show it",
		Input: &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Hint: "TEXT | pause | resume | clear"}}},
}

// isServerCommand says whether name is one of the server's own commands.
func isServerCommand(name string) bool {
	if name == "steer" {
		return true
	}
	for _, c := range sessionCommands {
		if c.Name == name {
			return true
		}
	}
	return false
}

// sessionCommand runs text when it is /rewind, /redo or /goal (ok), and
// answers the prompt: an agent message saying what happened, then
// end_turn. A failure is the prompt's error, with the service's code (a
// changed workspace's paths under data.differs).
func (st *conv) sessionCommand(text, rid string) (r acp.PromptResponse, ok bool, err error) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return r, false, nil
	}
	name := fields[0]
	if name != "/rewind" && name != "/redo" && name != "/goal" {
		return r, false, nil
	}
	svc, id := st.srv.opts.Sessions, string(st.id)
	ctx := sessions.WithActor(st.ctx, st.srv.agentSourceOf(rid).Principal.ID)
	var say string
	switch name {
	case "/goal":
		req, err := slashcmd.ParseGoal(strings.TrimPrefix(strings.TrimSpace(text), "/goal"))
		if err != nil {
			return r, true, rpcErr(err)
		}
		g, err := svc.Goal(ctx, id, req)
		if err != nil {
			return r, true, commandErr(st.closedIfGone(err))
		}
		say = slashcmd.GoalText(g)
	default:
		req, list, err := slashcmd.ParseRewind(fields[1:], name == "/redo")
		if err != nil {
			return r, true, rpcErr(err)
		}
		if list {
			events, err := svc.History(ctx, id, 0)
			if err != nil {
				return r, true, commandErr(st.closedIfGone(err))
			}
			say = slashcmd.RewindPoints(events, "rewind with /rewind "+slashcmd.RewindUsage)
			break
		}
		res, err := svc.Rewind(ctx, id, req)
		if err != nil {
			return r, true, commandErr(st.closedIfGone(err))
		}
		// ACP has no update that takes messages back out of the editor's
		// view: after a conversation rewind this message is all it is told.
		say = slashcmd.Rewound(res.Event)
	}
	st.sendText(kindMessage, strings.TrimRight(say, "\n")+"\n")
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, true, nil
}

// commandErr is rpcErr(err) with the error's details (such as the paths
// a REWIND_WORKSPACE_CHANGED names, under "differs") in its data.
func commandErr(err error) error {
	out := rpcErr(err)
	var e *errs.Error
	var re *acp.RequestError
	if errors.As(err, &e) && len(e.Details) > 0 && errors.As(out, &re) {
		if d, ok := re.Data.(map[string]any); ok {
			for k, v := range e.Details {
				if _, taken := d[k]; !taken {
					d[k] = v
				}
			}
		}
	}
	return out
}
