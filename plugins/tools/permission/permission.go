// Package permission is the tools.permission plugin: it refuses calls of
// the tools it denies, or of every tool outside its allow list, before they
// run. Mounted in a preset it governs one agent; on the root, all of them.
package permission

import (
	stdctx "context"
	"fmt"
	"slices"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/tools"
)

// Config is the plugin's configuration.
type Config struct {
	// Deny lists tools that may not run.
	Deny []string `koanf:"deny" json:"deny,omitempty"`
	// Allow, when set, lists the only tools that may run.
	Allow []string `koanf:"allow" json:"allow,omitempty"`
}

// Allowed reports whether the tool may run.
func (c Config) Allowed(name string) bool {
	if slices.Contains(c.Deny, name) {
		return false
	}
	return len(c.Allow) == 0 || slices.Contains(c.Allow, name)
}

// Plugin is tools.permission.
var Plugin = plugin.Register("tools.permission", "refuses calls of denied tools (or of tools outside an allow list)", func(ctx *dshctx.Context, cfg Config) error {
	_, err := tools.EventExecute.On(ctx, func(ctx stdctx.Context, x tools.Execution, next tools.ExecuteNext) (tools.Result, error) {
		if !cfg.Allowed(x.Call.Name) {
			return tools.Result{Content: fmt.Sprintf("the tool %q is not permitted for this agent", x.Call.Name), IsError: true}, nil
		}
		return next.Call(ctx, x)
	})
	return err
})
