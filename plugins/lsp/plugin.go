package lsp

import (
	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/tools"
)

// entry is one entry of the lsp plugin: its config and its servers.
type entry struct {
	cfg     Config
	servers *servers
}

// Plugin starts the configured language servers on demand, appends new
// errors to write and edit results, and registers the lsp_* tools in its
// context's scope.
var Plugin = plugin.Register("tools.lsp", "language servers (gopls, ...): new errors after each write and edit, and the tools lsp_definition, lsp_references, lsp_hover, lsp_symbols", apply, tools.Key)

func apply(ctx *dshctx.Context, cfg Config) error {
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return err
	}
	cfg = cfg.withDefaults()
	p := &entry{cfg: cfg, servers: newServers(cfg, ctx.Logger().Named("lsp"))}
	if _, err := ctx.OnDispose("lsp servers", func() error {
		p.servers.closeAll()
		return nil
	}); err != nil {
		return err
	}
	if *cfg.Diagnostics {
		if _, err := tools.EventExecute.On(ctx, p.afterEdit); err != nil {
			return err
		}
	}
	for _, t := range p.tools() {
		if err := svc.Register(ctx, t); err != nil {
			return err
		}
	}
	return nil
}
