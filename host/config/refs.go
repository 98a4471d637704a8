package config

import (
	"fmt"
	"maps"
	"slices"

	"github.com/dsh-go/dsh/plugin"
)

// checkReferences finds, without starting anything, what Start would
// refuse: agents naming a provider nothing registers for them, a session
// with no store to keep it, presets listed twice, and one provider name
// registered twice in one scope. Scopes own what is registered in them: a
// preset's provider belongs to each agent that mounts the preset and may
// shadow a root provider of the same name, but two providers of one name
// at the root, or among one agent's presets, are a conflict.
func (c *Config) checkReferences(p *problems) {
	known := true // false when an entry's provider name cannot be known
	reported := map[string]bool{}
	// register records the providers of list in scope (name → who) and
	// reports a name the scope already has.
	register := func(scope map[string]string, list []Entry, at, forAgent string) {
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
			if prev, dup := scope[name]; dup {
				msg := fmt.Sprintf("model provider %q is already registered by %s%s; provider names are unique within a scope: load it once, or give this one another config: {name: ...}", name, prev, forAgent)
				if !reported[key+msg] {
					reported[key+msg] = true
					p.add(key, msg)
				}
				continue
			}
			scope[name] = fmt.Sprintf("%s (id %q)", key, e.ID)
		}
	}
	root := map[string]string{}
	register(root, c.Plugins, "plugins", "")

	for i := range c.Agents {
		a := &c.Agents[i]
		at := fmt.Sprintf("agents[%d]", i)
		own := map[string]string{} // the providers of the agent's own scope
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
				register(own, list, "presets."+name, fmt.Sprintf(" in the scope of agent %q", a.ID))
			}
		}
		_, atRoot := root[a.Provider]
		_, inScope := own[a.Provider]
		if a.Provider != "" && known && !atRoot && !inScope {
			names := slices.Sorted(maps.Keys(root))
			for n := range own {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
			slices.Sort(names)
			msg := fmt.Sprintf("model provider %q is not registered for this agent, under plugins: or in its presets (registered: %s)", a.Provider, orNone(names))
			if _, ok := plugin.Lookup("llm." + a.Provider); ok {
				msg += fmt.Sprintf("; add a plugin entry such as use: llm.%s", a.Provider)
			} else {
				msg += "; add the provider's plugin (see dsh plugins) or fix the name"
			}
			p.add(at+".provider", msg)
		}
		if a.Session != "" && !c.Persists(a.ID) {
			p.add(at+".session", fmt.Sprintf("session %q needs a plugin that persists sessions; add a plugin entry such as use: session.jsonl under plugins: or in one of this agent's presets, or remove session:", a.Session))
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
