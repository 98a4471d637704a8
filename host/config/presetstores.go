package config

import (
	"fmt"
)

// PresetStore is a session store a preset mounts that no root store covers.
type PresetStore struct {
	// At is where the entry is, "presets.shared[1]".
	At string
	// Entry is the config's own entry, so PluginConfig finds its config.
	Entry *Entry
}

// PresetStores returns the session stores of the presets the config
// defines whose directory no root store and no earlier preset (in name
// order) already writes: one per directory, so a catalog that mounts them
// lists each stored session once. A store whose directory cannot be told
// (it keeps its sessions elsewhere than on disk) is returned once per id.
func (c *Config) PresetStores() []PresetStore {
	seen := map[string]bool{}
	for _, s := range c.storesIn(c.Plugins, "plugins") {
		seen["dir:"+s.dir] = true
	}
	var out []PresetStore
	for _, name := range c.DefinedPresets() {
		list, err := c.Preset(name)
		if err != nil {
			continue
		}
		for i := range list {
			e := &list[i]
			if !IsSessionStore(e) {
				continue
			}
			key := "id:" + e.ID
			if dir, ok := c.storeDirOf(e); ok {
				key = "dir:" + dir
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, PresetStore{At: fmt.Sprintf("presets.%s[%d]", name, i), Entry: e})
		}
	}
	return out
}
