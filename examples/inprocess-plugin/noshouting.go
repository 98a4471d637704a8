package main

import (
	stdctx "context"
	"fmt"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

// ShoutingConfig is example.no-shouting's config; an entry's `config:` is
// decoded into it strictly, so a typo in a key is an error naming the line.
type ShoutingConfig struct {
	// MinLetters is how many capital letters a prompt needs before it can
	// count as shouting.
	MinLetters int `koanf:"min_letters"`
}

// Defaults are what an entry without config, or a key it leaves out, gets.
func (ShoutingConfig) Defaults() ShoutingConfig { return ShoutingConfig{MinLetters: 3} }

// Validate runs at `dsh config check` and again before the plugin starts.
func (c ShoutingConfig) Validate() error {
	if c.MinLetters < 1 {
		return fmt.Errorf("min_letters is %d; set at least 1", c.MinLetters)
	}
	return nil
}

// NoShouting is an admission listener: it refuses prompts written in
// capital letters and passes everything else on. Mounted under plugins: it
// hears every agent; in a preset, only the agents that list the preset.
var NoShouting = plugin.Register("example.no-shouting", "refuses prompts written in capital letters",
	func(ctx *dshctx.Context, cfg ShoutingConfig) error {
		_, err := agentcontroller.EventAdmission.On(ctx, func(c stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			if shouting(a.Message.Content, cfg.MinLetters) {
				return agentcontroller.Reject("example/shouting", "Please do not shout.", false), nil
			}
			return next.Call(c, a) // admit; waiting before this line would hold the message
		})
		return err
	})

func shouting(s string, minLetters int) bool {
	letters := 0
	for _, r := range s {
		if r >= 'a' && r <= 'z' {
			return false
		}
		if r >= 'A' && r <= 'Z' {
			letters++
		}
	}
	return letters >= minLetters
}
