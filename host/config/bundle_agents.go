package config

import (
	"strings"

	"github.com/dsh-go/dsh/internal/bundle"
	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// notToolName is what a bundle id may hold that a tool name may not.
var notToolName = lazyregexp.New(`[^a-zA-Z0-9_-]`)

// agentConfig is the tools.agent entry of a bundle's agents: one tool,
// named after the bundle so it cannot clash with the config's own agent
// tool or another bundle's, listing each agent with its system prompt.
// Without a template or provider each child inherits the calling agent's
// provider and model, as a Claude Code subagent without model: does.
func agentConfig(id string, b *bundle.Bundle) map[string]any {
	name := notToolName.ReplaceAllString(id, "_") + "_agent"
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	list := make([]any, 0, len(b.Agents))
	for _, a := range b.Agents {
		entry := map[string]any{"name": a.Name, "description": a.Description, "system_prompt": a.SystemPrompt}
		if a.Model != "" {
			entry["model"] = a.Model
		}
		list = append(list, entry)
	}
	return map[string]any{"name": name, "agents": list}
}

func agentNames(b *bundle.Bundle) string {
	names := make([]string, len(b.Agents))
	for i, a := range b.Agents {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}
