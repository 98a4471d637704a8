package config

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/errs"
)

// Lookups for callers that build an agent from a loaded config rather than
// from its agents: list — the host's OpenAgent. A Config is read-only once
// Load returns, so these are safe from any goroutine.

// Agent returns the configured agent with id.
func (c *Config) Agent(id string) (AgentConfig, bool) {
	for _, a := range c.Agents {
		if a.ID == id {
			return a, true
		}
	}
	return AgentConfig{}, false
}

// AgentIDs returns the ids of the configured agents, in config order.
func (c *Config) AgentIDs() []string {
	out := make([]string, 0, len(c.Agents))
	for _, a := range c.Agents {
		out = append(out, a.ID)
	}
	return out
}

// Preset returns the entries of the preset name as an agent mounts them:
// the config's own preset, else the built-in one of that name — checked
// and decoded at Load even when no configured agent uses it. A name that
// is neither, or a built-in one whose plugins this binary lacks, is a
// CONFIG_INVALID error listing what exists.
func (c *Config) Preset(name string) ([]Entry, error) {
	if list, ok := c.Presets[name]; ok {
		return list, nil
	}
	if list, ok := c.spare[name]; ok {
		return list, nil
	}
	if problem, ok := c.spareErr[name]; ok {
		return nil, errs.New(Invalid, fmt.Sprintf("built-in preset %q cannot be used here: %s", name, problem))
	}
	return nil, errs.New(Invalid, fmt.Sprintf("preset %q is not defined; defined presets: %s; built-in: %s",
		name, orNone(c.DefinedPresets()), strings.Join(builtinNames(), ", ")))
}

// DefinedPresets returns the names of the presets the config itself
// defines, sorted: not the built-in ones it only uses.
func (c *Config) DefinedPresets() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(c.Presets)) {
		if !c.builtin[name] {
			out = append(out, name)
		}
	}
	return out
}

// BuiltinPresetNames returns the names of the built-in presets, in order.
func BuiltinPresetNames() []string { return builtinNames() }

// WorkingDir is the directory the config's relative paths started from
// when it was loaded; "" for a Config built in code.
func (c *Config) WorkingDir() string { return c.wd }

// addSparePresets checks and decodes the built-in presets no agent uses,
// so an agent opened later (host.OpenAgent) can mount them. Their problems
// — a plugin this binary does not register — are kept for that moment
// rather than failing a config that never names them.
func (c *Config) addSparePresets(p *problems) {
	c.spare, c.spareErr = map[string][]Entry{}, map[string]string{}
	for _, b := range BuiltinPresets() {
		if _, inUse := c.Presets[b.Name]; inUse {
			continue
		}
		scratch := &problems{file: p.file, sources: map[string]string{}}
		c.checkEntries(b.Entries, "built-in preset "+b.Name, scratch)
		if !scratch.empty() {
			c.spareErr[b.Name] = strings.Join(scratch.list, "; ")
			continue
		}
		c.spare[b.Name] = b.Entries
	}
}
