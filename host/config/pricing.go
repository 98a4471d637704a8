package config

import (
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/services/usage"
)

// checkPricing reports the mistakes of the pricing: key; its unknown keys
// and wrong types were reported by the strict decode.
func (c *Config) checkPricing(p *problems) {
	for _, pr := range c.Pricing.Check() {
		p.add(joinPath("pricing", pr.Key), pr.Message)
	}
}

// DefaultModel returns the model the provider named provider uses when an
// agent names none: the model: key of the root plugin entry that registers
// it, or "" when the config does not say.
func (c *Config) DefaultModel(provider string) string {
	for i := range c.Plugins {
		e := &c.Plugins[i]
		if e.Use == "" || e.Disabled {
			continue
		}
		info, ok := plugin.Lookup(e.Use)
		if !ok || info.Provider == nil {
			continue
		}
		cfg := c.PluginConfig(e)
		if cfg == nil {
			cfg = e.Config
		}
		if info.Provider(cfg) != provider {
			continue
		}
		if m, ok := e.Config["model"].(string); ok {
			return m
		}
	}
	return ""
}

// ModelOf returns a function naming the model of a step recorded without
// one: the agent's model: when set, else its provider's default.
func (c *Config) ModelOf(ac AgentConfig) func(provider string) string {
	return func(provider string) string {
		if ac.Model != "" && (provider == "" || provider == ac.Provider) {
			return ac.Model
		}
		return c.DefaultModel(provider)
	}
}

// Account returns a usage account priced by the config's pricing: key,
// for agent ac's session.
func (c *Config) Account(ac AgentConfig) *usage.Account {
	return usage.NewAccount(c.Pricing, c.ModelOf(ac))
}
