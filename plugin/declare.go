package plugin

// What a plugin declares here lets `dsh config check` know what an entry
// will register without starting it. Call these on the result of Register,
// in the same package variable initializer:
//
//	var Plugin = plugin.Register("llm.scripted", doc, apply, llm.Key).
//		ProvidesModel(func(c Config) string { return c.Name })

// ProvidesModel declares that the plugin registers a model provider and
// how an entry's config names it; name gets the config decoded over the
// defaults (not yet validated), so it can fall back to the plugin's
// default name. Config check
// uses it to resolve agents' provider: and refuse duplicate names.
func (p *Plugin[C]) ProvidesModel(name func(C) string) *Plugin[C] {
	p.update(func(info *Info) {
		info.Provider = func(config any) string {
			cfg, err := p.Convert(config)
			if err != nil {
				cfg = p.defaults()
			}
			return name(cfg)
		}
	})
	return p
}

// StoresSessions declares that the plugin persists sessions, which an
// agent with a session: needs.
func (p *Plugin[C]) StoresSessions() *Plugin[C] {
	p.update(func(info *Info) { info.SessionStore = true })
	return p
}

func (p *Plugin[C]) update(change func(*Info)) {
	mu.Lock()
	defer mu.Unlock()
	info := registry[p.Name()]
	change(&info)
	registry[p.Name()] = info
}
