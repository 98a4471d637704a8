package config

// OnlyPlugins is a copy of c whose root plugin entries are those keep
// accepts, each with its decoded config. A command that needs one part of
// the tree (the session store, to list sessions) starts that part alone,
// without the model providers and the rest, which may need keys or
// services it has no use for.
func (c *Config) OnlyPlugins(keep func(*Entry) bool) *Config {
	out := *c
	out.Plugins = nil
	out.decoded = make(map[*Entry]any, len(c.decoded))
	for e, v := range c.decoded {
		out.decoded[e] = v // entries of presets and agents, unchanged
	}
	for i := range c.Plugins {
		if e := &c.Plugins[i]; keep(e) {
			out.Plugins = append(out.Plugins, *e)
		}
	}
	for i := range out.Plugins {
		for j := range c.Plugins {
			if c.Plugins[j].ID == out.Plugins[i].ID {
				if v, ok := c.decoded[&c.Plugins[j]]; ok {
					out.decoded[&out.Plugins[i]] = v
				}
			}
		}
	}
	return &out
}

// Replayable is a plugin config with a form for `dsh replay`: the same
// decisions, without effects outside the replay. A budget keeping its
// counters in a shared bucket counts in memory instead, so a replay
// neither spends nor is refused by the real quota.
type Replayable interface {
	ForReplay() any
}

// ForReplay is a copy of c whose decoded plugin configs that are
// Replayable are replaced by their replay form, at the root and in
// presets and agents alike.
func (c *Config) ForReplay() *Config {
	out := *c
	out.decoded = make(map[*Entry]any, len(c.decoded))
	for e, v := range c.decoded {
		if r, ok := v.(Replayable); ok {
			v = r.ForReplay()
		}
		out.decoded[e] = v
	}
	return &out
}
