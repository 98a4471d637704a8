package config

import (
	"slices"

	"github.com/dsh-go/dsh/plugin"
)

// Persists reports whether the sessions of agent agentID, opened with
// the presets extra after its own, are kept by a session store: one
// mounted at the root, or one in a preset the agent mounts (a store in a
// preset persists exactly that preset's agents). agentID may name no
// configured agent (a template-less session): then only the root and
// extra count.
//
// It is the one answer to "is this session stored?": dsh run, dsh
// sessions, config check and dsh serve all ask it, so they cannot
// disagree about a config.
func (c *Config) Persists(agentID string, extra ...string) bool {
	if hasStore(c.Plugins) {
		return true
	}
	var presets []string
	if a, ok := c.Agent(agentID); ok {
		presets = a.PresetNames()
	}
	for _, name := range append(presets, extra...) {
		if list, err := c.Preset(name); err == nil && hasStore(list) {
			return true
		}
	}
	return false
}

// hasStore reports whether list holds an enabled session-store entry.
func hasStore(list []Entry) bool {
	return slices.ContainsFunc(list, func(e Entry) bool { return IsSessionStore(&e) })
}

// IsSessionStore reports whether e is an enabled entry of a plugin that
// stores sessions (session.jsonl, session.nats): the one test every
// question about persistence asks of an entry.
func IsSessionStore(e *Entry) bool {
	if e.Disabled || e.Use == "" {
		return false
	}
	info, ok := plugin.Lookup(e.Use)
	return ok && info.SessionStore
}
