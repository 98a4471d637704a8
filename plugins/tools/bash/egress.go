package bash

import (
	"log/slog"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/egress"
)

// newEgress is the proxy that serves the listener of every proxied
// command of one plugin instance. Its refusals go to the plugin's log under
// the agent's name; the command itself reads them in the proxy's 403.
func newEgress(p egress.Policy, ctx *dshctx.Context) *egress.Proxy {
	return egress.New(p, egress.Options{
		Agent:  ctx.Tag(),
		Logger: slog.New(slog.DiscardHandler),
		OnRefusal: func(r egress.Refusal) {
			ctx.Logger().Warn("tools.bash: the egress policy refused a request", "agent", r.Agent, "target", r.Target, "reason", r.Reason)
		},
	})
}
