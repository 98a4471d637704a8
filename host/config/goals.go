package config

import (
	"time"

	"github.com/dsh-go/dsh/services/sessions"
)

// GoalsConfig is the goals: key: how long the session service waits
// between a goal's check-ins after turns in which the model ran no tool.
type GoalsConfig struct {
	// MinBackoff is the first wait (default 1s); it doubles after each
	// such turn up to MaxBackoff (default 5m).
	MinBackoff time.Duration `koanf:"min_backoff"`
	MaxBackoff time.Duration `koanf:"max_backoff"`
}

// GoalOptions returns the session service's goal options for this
// config: its back-off, and its pricing: key for cost budgets.
func (c *Config) GoalOptions() sessions.GoalOptions {
	return sessions.GoalOptions{MinBackoff: c.Goals.MinBackoff, MaxBackoff: c.Goals.MaxBackoff, Pricing: c.Pricing}
}

func (c *Config) checkGoals(p *problems) {
	g := c.Goals
	switch {
	case g.MinBackoff < 0:
		p.addf("goals.min_backoff", "%s is negative; leave it out for 1s", g.MinBackoff)
	case g.MaxBackoff < 0:
		p.addf("goals.max_backoff", "%s is negative; leave it out for 5m", g.MaxBackoff)
	case g.MaxBackoff > 0 && g.MinBackoff > g.MaxBackoff:
		p.addf("goals.min_backoff", "%s is above max_backoff (%s); the back-off grows from min_backoff to max_backoff", g.MinBackoff, g.MaxBackoff)
	}
}
