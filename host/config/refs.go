package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/dsh-go/dsh/plugin"
)

// checkReferences finds, without starting anything, what Start would
// refuse: agents naming a provider nothing registers, a session with no
// store to keep it, presets listed twice, and provider names registered
// twice — by two entries, or by a preset that every agent using it mounts
// again.
func (c *Config) checkReferences(p *problems) {
	// Where each provider name is registered, in start order: root entries
	// once, then each agent's presets once per agent.
	type origin struct{ at, what string }
	registered := map[string]origin{}
	known := true // false when an entry's provider name cannot be known
	register := func(list []Entry, at, what, agent string) {
		for i := range list {
			e := &list[i]
			if e.Disabled {
				continue
			}
			info, found := plugin.Lookup(e.Use)
			if e.Use != "" && (!found || info.Provider != nil && !c.decodedOK(e)) {
				known = false // a misspelled or misconfigured provider, maybe
			}
			name, ok := c.providerOf(e)
			if !ok {
				continue
			}
			key := fmt.Sprintf("%s[%d]", at, i)
			if prev, dup := registered[name]; dup {
				msg := fmt.Sprintf("model provider %q is already registered %s", name, prev.what)
				if what != "" {
					msg = fmt.Sprintf("model provider %q is registered again %s; it is already registered %s", name, what, prev.what)
				}
				p.add(key, msg+"; provider names are unique: load each provider once, under plugins:, or give this one another config: {name: ...}")
				continue
			}
			by := fmt.Sprintf("by %s (id %q)", key, e.ID)
			if agent != "" {
				by += fmt.Sprintf(" for agent %q", agent)
			}
			registered[name] = origin{key, by}
		}
	}
	register(c.Plugins, "plugins", "", "")
	root := slices.Sorted(maps.Keys(registered))

	store := false
	for i := range c.Plugins {
		if info, ok := plugin.Lookup(c.Plugins[i].Use); ok && info.SessionStore && !c.Plugins[i].Disabled {
			store = true
		}
	}

	for i := range c.Agents {
		a := &c.Agents[i]
		at := fmt.Sprintf("agents[%d]", i)
		seen := map[string]string{}
		for j, name := range a.PresetNames() {
			key := at + ".preset"
			if a.Preset == "" || j > 0 {
				key = fmt.Sprintf("%s.presets[%d]", at, j-boolInt(a.Preset != ""))
			}
			if prev, dup := seen[name]; dup {
				p.add(key, fmt.Sprintf("preset %q is listed twice for this agent (also %s); list each preset once, under preset: or presets:", name, prev))
				continue
			}
			seen[name] = key
			if list, ok := c.Presets[name]; ok {
				register(list, "presets."+name, fmt.Sprintf("when preset %q is mounted for agent %q", name, a.ID), a.ID)
			}
		}
		if a.Provider != "" && known && !slices.Contains(root, a.Provider) {
			msg := fmt.Sprintf("model provider %q is not registered by any plugin under plugins: (registered: %s)", a.Provider, orNone(root))
			if _, ok := plugin.Lookup("llm." + a.Provider); ok {
				msg += fmt.Sprintf("; add a plugin entry such as use: llm.%s", a.Provider)
			} else {
				msg += "; add the provider's plugin (see dsh plugins) or fix the name"
			}
			p.add(at+".provider", msg)
		}
		if a.Session != "" && !store {
			p.add(at+".session", fmt.Sprintf("session %q needs a plugin that persists sessions; add a plugin entry such as use: session.jsonl under plugins:, or remove session:", a.Session))
		}
	}
}

// providerOf returns the provider name an enabled entry registers.
func (c *Config) providerOf(e *Entry) (string, bool) {
	if e.Disabled || e.Use == "" {
		return "", false
	}
	info, ok := plugin.Lookup(e.Use)
	if !ok || info.Provider == nil || !c.decodedOK(e) {
		return "", false
	}
	return info.Provider(c.decoded[e]), true
}

// decodedOK reports whether an entry's config decoded (or there was none
// to decode), so what it registers can be known.
func (c *Config) decodedOK(e *Entry) bool {
	if e.Use == "" {
		return true
	}
	info, ok := plugin.Lookup(e.Use)
	if !ok {
		return false
	}
	if info.Config == nil {
		return true
	}
	_, ok = c.decoded[e]
	return ok
}
