// Package maxpending is the admission.max-pending plugin: it refuses a
// message when its agent already has Max messages waiting in its inbox
// (reason admission/inbox-full).
package maxpending

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/waterfall"
)

func init() {
	host.Register(host.Info{
		ID: "admission.max-pending", Doc: "refuses messages to an agent whose inbox already holds max messages",
		Plugin: Plugin, Config: func() any { return &Config{} },
	})
}

// Reason is the refusal reason.
const Reason = "admission/inbox-full"

// Config is the plugin's configuration.
type Config struct {
	// Max is the most messages that may wait in an agent's inbox; a
	// message that would be one more is refused.
	Max int `koanf:"max" json:"max"`
}

// Plugin is admission.max-pending. Its config is a Config or *Config.
var Plugin = dshctx.Define("admission.max-pending", func(ctx *dshctx.Context, config any) error {
	cfg, err := dshctx.ConfigAs[Config]("admission.max-pending", config)
	if err != nil {
		return err
	}
	if cfg.Max < 1 {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("admission.max-pending: max is %d; set how many messages may wait, at least 1", cfg.Max))
	}
	_, err = agentcontroller.EventAdmission.On(ctx, func(ctx stdctx.Context, a agentcontroller.Admission, next waterfall.Next[agentcontroller.Admission, agentcontroller.Decision]) (agentcontroller.Decision, error) {
		if n := a.Agent.Pending(); n >= cfg.Max {
			return agentcontroller.Reject(Reason, fmt.Sprintf(
				"agent %q already has %d messages waiting (the limit is %d); retry when it has caught up", a.Agent.ID(), n, cfg.Max), false), nil
		}
		return next.Call(ctx, a)
	})
	return err
})
