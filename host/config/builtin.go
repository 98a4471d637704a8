package config

import "slices"

// Built-in presets: the modes of issue 13, usable by any config without
// defining them. A config that defines a preset of the same name uses its
// own instead.
const (
	PresetReadOnly       = "read-only"
	PresetWorkspaceWrite = "workspace-write"
	PresetFullAccess     = "full-access"
	// PresetPlan adds plan mode and todos (tools.plan), starting in plan
	// mode; name it beside a mode preset: presets: [workspace-write, plan].
	PresetPlan = "plan"
)

// BuiltinPreset is a preset dsh ships.
type BuiltinPreset struct {
	Name string
	// Doc says in one line what an agent with the preset may do.
	Doc     string
	Entries []Entry
}

// BuiltinPresets returns the built-in presets in order, each call a fresh
// copy: checking a config writes into its entries.
func BuiltinPresets() []BuiltinPreset { return builtins() }

// builtins is a variable so tests can check the mechanism with presets of
// their own.
var builtins = shippedPresets

func shippedPresets() []BuiltinPreset {
	files := func(config map[string]any) Entry { return Entry{Use: "tools.files", Config: config} }
	bash := func(config map[string]any) Entry { return Entry{Use: "tools.bash", Config: config} }
	// web_fetch asks first under workspace-write (the tool's default) and
	// runs under full-access; web_search needs a provider's key, so only a
	// config turns it on (tools.web with search.provider). inherit keeps a
	// root tools.web's web_fetch, and so its network policy, in force.
	web := Entry{Use: "tools.web", Config: map[string]any{"inherit": true}}
	mode := func(m string) Entry { return Entry{Use: "tools.permission", Config: map[string]any{"mode": m}} }
	return []BuiltinPreset{
		{
			Name: PresetReadOnly,
			Doc:  "read, list, glob and grep in the workspace; nothing writes, no bash",
			Entries: []Entry{
				files(map[string]any{"tools": []any{"read", "list", "glob", "grep"}}),
				mode(PresetReadOnly),
			},
		},
		{
			Name: PresetWorkspaceWrite,
			Doc:  "the file tools write inside the workspace; bash runs sandboxed (also in the background: jobs) and web_fetch reaches the internet, both asking first",
			Entries: []Entry{
				files(nil),
				bash(map[string]any{"jobs": map[string]any{"enabled": true}}),
				web,
				mode(PresetWorkspaceWrite),
			},
		},
		{
			Name: PresetFullAccess,
			Doc:  "every tool, bash (and its background jobs) without a sandbox, nothing asks (explicit deny rules still hold)",
			Entries: []Entry{
				// Unsandboxed bash can write .git/config anyway: asking
				// before the file tools do would protect nothing.
				files(map[string]any{"protected_writes": "allow"}),
				bash(map[string]any{"sandbox": map[string]any{"mode": "off"}, "jobs": map[string]any{"enabled": true}}),
				web,
				mode(PresetFullAccess),
			},
		},
		{
			Name: PresetPlan,
			Doc:  "starts in plan mode: only read-only tools run until a person approves the plan; adds the todo tool (name it beside a mode)",
			Entries: []Entry{
				{Use: "tools.plan", Config: map[string]any{"mode": "plan"}},
			},
		},
	}
}

// builtinPreset returns a fresh copy of the built-in preset name.
func builtinPreset(name string) ([]Entry, bool) {
	all := BuiltinPresets()
	i := slices.IndexFunc(all, func(p BuiltinPreset) bool { return p.Name == name })
	if i < 0 {
		return nil, false
	}
	return all[i].Entries, true
}

// BuiltinPresetInUse reports whether the preset name of c is the built-in
// one (an agent uses it and the config does not define its own).
func (c *Config) BuiltinPresetInUse(name string) bool { return c.builtin[name] }

// addBuiltinPresets puts the built-in presets the agents name, and the
// config does not define, into c.Presets. Only the ones in use are added:
// a config that never names a mode does not depend on the plugins behind
// them.
func (c *Config) addBuiltinPresets() {
	c.builtin = map[string]bool{}
	for _, a := range c.Agents {
		for _, name := range a.PresetNames() {
			if _, defined := c.Presets[name]; defined {
				continue
			}
			if entries, ok := builtinPreset(name); ok {
				if c.Presets == nil {
					c.Presets = map[string][]Entry{}
				}
				c.Presets[name] = entries
				c.builtin[name] = true
			}
		}
	}
}

func builtinNames() []string {
	var out []string
	for _, p := range BuiltinPresets() {
		out = append(out, p.Name)
	}
	return out
}
