package sessions

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/waterfall"
)

// PromptCommand is a prompt command a session's agent offers: a prompt
// "/Name args" that the agent's prepare stage expands (the prompt.commands
// plugin). Entry points list them (ACP's available commands, the CLI's
// /help, the web page) and send them as ordinary prompts.
type PromptCommand struct {
	Name         string `json:"name"`
	Description  string `json:"description,omitempty"`
	ArgumentHint string `json:"argument_hint,omitempty"`
}

// CommandsQuery is the payload of session/commands.
type CommandsQuery struct {
	Agent agents.Agent
}

// EventCommands asks the agent's scope for the prompt commands it offers,
// each once, under the name a prompt uses. A plugin that expands commands
// answers it; without one the list is empty.
var EventCommands = waterfall.New("session/commands", func(stdctx.Context, CommandsQuery) ([]PromptCommand, error) {
	return nil, nil
})

// Commands returns the prompt commands open session id offers.
func (c *Controller) Commands(ctx stdctx.Context, id string) ([]PromptCommand, error) {
	s, err := c.session(id)
	if err != nil {
		return nil, err
	}
	agent := s.handle.Agent
	return EventCommands.Dispatch(ctx, agent.Context(), CommandsQuery{Agent: agent})
}
