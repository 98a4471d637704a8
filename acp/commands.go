package acp

import (
	"github.com/coder/acp-go-sdk"
)

// promptCommands are the session agent's prompt commands (the
// prompt.commands plugin's files) as ACP commands. The editor sends one
// back as a prompt "/name args", which the agent controller's prepare stage
// expands like any entry point's; the server adds nothing. A file named
// after one of the server's own commands (steer, rewind, redo, goal;
// slash.go) is left out: the server's would shadow it.
func (st *conv) promptCommands() []acp.AvailableCommand {
	var out []acp.AvailableCommand
	list, _ := st.srv.opts.Sessions.Commands(st.ctx, string(st.id))
	for _, c := range list {
		if isServerCommand(c.Name) {
			continue
		}
		ac := acp.AvailableCommand{Name: c.Name, Description: c.Description}
		if c.ArgumentHint != "" {
			ac.Input = &acp.AvailableCommandInput{Unstructured: &acp.UnstructuredCommandInput{Hint: c.ArgumentHint}}
		}
		out = append(out, ac)
	}
	return out
}
