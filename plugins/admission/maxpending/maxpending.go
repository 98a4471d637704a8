// Package maxpending is the admission.max-pending plugin: it refuses a
// message when its agent already has Max messages waiting in its inbox
// (reason admission/inbox-full).
package maxpending

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

// Reason is the refusal reason.
const Reason = "admission/inbox-full"

// Config is the plugin's configuration.
type Config struct {
	// Max is the most messages that may wait in an agent's inbox; a
	// message that would be one more is refused.
	Max int `koanf:"max" json:"max"`
}

// Validate checks the config before anything starts.
func (c Config) Validate() error {
	if c.Max < 1 {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("max is %d; set how many messages may wait, at least 1", c.Max))
	}
	return nil
}

// Plugin is admission.max-pending.
var Plugin = plugin.Register("admission.max-pending", "refuses messages to an agent whose inbox already holds max messages", func(ctx *dshctx.Context, cfg Config) error {
	_, err := agentcontroller.EventAdmission.On(ctx, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if n := a.Agent.Pending(); n >= cfg.Max {
			return agentcontroller.Reject(Reason, fmt.Sprintf(
				"agent %q already has %d messages waiting (the limit is %d); retry when it has caught up", a.Agent.ID(), n, cfg.Max), false), nil
		}
		return next.Call(ctx, a)
	})
	return err
})
