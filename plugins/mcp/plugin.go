package mcp

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/systemprompt"
	"github.com/dsh-go/dsh/services/tools"
)

// Codes of the plugin.
const (
	// Unavailable: a server with on_unavailable: fail did not start.
	Unavailable errs.Code = "MCP_SERVER_UNAVAILABLE"
	// StopTimeout: the server's teardown outlasted the dispose deadline.
	StopTimeout errs.Code = "MCP_SERVER_STOP_TIMEOUT"
)

// Plugin connects one MCP server and registers its tools in the entry's
// scope.
var Plugin = plugin.Register("tools.mcp", "the tools of one MCP server (stdio or streamable HTTP), as server__tool", apply, tools.Key)

func apply(ctx *dshctx.Context, cfg Config) error {
	svc, err := tools.Key.Get(ctx)
	if err != nil {
		return err
	}
	s := newServer(ctx, svc, cfg)
	if _, err := systemprompt.EventAssemble.On(ctx, s.assemble); err != nil {
		return err
	}
	loop, stop := stdctx.WithCancel(stdctx.Background())
	first := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.run(loop, first)
	}()
	if err := <-first; err != nil {
		if cfg.OnUnavailable == Fail {
			stop()
			<-done
			e := errs.Wrap(Unavailable, err, fmt.Sprintf(
				"MCP server %q did not start; fix its command or url, or set on_unavailable: skip to start without it", cfg.Name))
			// Whoever mounted several servers (an ACP session's editor)
			// learns which one failed without parsing the message.
			e.Details = map[string]any{"server": cfg.Name}
			return e
		}
		s.log.Warn("starting without the MCP server (on_unavailable: skip); dsh keeps trying to start it", "error", err)
	}
	_, err = ctx.OnDisposeCtx("mcp server "+cfg.Name, func(dctx stdctx.Context) error {
		stop()
		select {
		case <-done:
			return nil
		case <-dctx.Done():
			return errs.New(StopTimeout, fmt.Sprintf("MCP server %q did not stop before the dispose deadline", cfg.Name))
		}
	})
	if err != nil {
		stop()
		<-done
	}
	return err
}
