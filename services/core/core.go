// Package core mounts the core services — agents, session (the session
// log), llm, approval, tools, systemPrompt and protect (the protected-path
// list) — on a context, in the order they depend on each other: approval
// reads agents, and the tools' approval stage asks approval. The agent
// loop, the agent controller and the session service (sessions) are
// applied on top with their own configuration.
package core

import (
	stdctx "context"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/protect"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/services/tools"
)

// Plugins are the core service plugins.
func Plugins() []dshctx.Plugin {
	return []dshctx.Plugin{agents.Plugin, session.Plugin, llm.Plugin, approval.Plugin, tools.Plugin, systemprompt.Plugin, protect.Plugin}
}

// Mount applies the core service plugins in ctx and returns the first
// failure.
func Mount(ctx *dshctx.Context) error {
	for _, p := range Plugins() {
		f, err := ctx.Plugin(p, nil)
		if err != nil {
			return err
		}
		if err := f.Await(stdctx.Background()); err != nil {
			return err
		}
	}
	return nil
}
