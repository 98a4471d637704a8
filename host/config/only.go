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
