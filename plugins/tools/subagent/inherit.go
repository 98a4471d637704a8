package subagent

import (
	"slices"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// inherited is the provider and model a subagent without a template or
// provider runs on: those of the model answer that made call callID, so a
// child follows its parent even where a plugin picked the model per
// request. model, when set, replaces the parent's model (it must be one
// of the same provider). Empty when the parent's log has no such answer.
func inherited(parent agents.Agent, callID, model string) (string, string) {
	if parent == nil || parent.Session() == nil {
		return "", ""
	}
	events := parent.Session().Events(1)
	for i := len(events) - 1; i >= 0; i-- {
		e := events[i]
		if e.Type != session.AssistantMessage || e.Message == nil || e.Provider == "" {
			continue
		}
		if !slices.ContainsFunc(e.Message.ToolCalls, func(c llm.ToolCall) bool { return c.ID == callID }) {
			continue
		}
		if model == "" {
			model = e.Model
		}
		return e.Provider, model
	}
	return "", ""
}
