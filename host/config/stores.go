package config

import (
	"fmt"
	"path/filepath"
	"reflect"
)

// StoreDirer may be implemented by the config of a plugin that persists
// sessions, to say which directory it keeps them in. Without it the
// config's string field tagged koanf:"dir" is taken (session.jsonl's), so
// this package needs no import of any store.
type StoreDirer interface{ StoreDir() string }

// store is an enabled session-store entry and the directory it writes.
type store struct {
	at  string // key path, "plugins[1]"
	id  string
	dir string // absolute and clean
}

func (s store) String() string { return fmt.Sprintf("%s (id %q)", s.at, s.id) }

// storesIn returns the session stores of list whose directory is known.
func (c *Config) storesIn(list []Entry, at string) []store {
	var out []store
	for i := range list {
		e := &list[i]
		if !IsSessionStore(e) {
			continue
		}
		dir, ok := c.storeDirOf(e)
		if !ok {
			continue
		}
		out = append(out, store{at: fmt.Sprintf("%s[%d]", at, i), id: e.ID, dir: dir})
	}
	return out
}

// storeDirOf is the absolute, clean directory store entry e writes, when
// its config names one; relative paths start from the working directory.
func (c *Config) storeDirOf(e *Entry) (string, bool) {
	dir, ok := storeDir(c.decoded[e])
	if !ok {
		return "", false
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(c.wd, dir)
	}
	return filepath.Clean(dir), true
}

// storeDir reads the directory out of a decoded store config.
func storeDir(cfg any) (string, bool) {
	if d, ok := cfg.(StoreDirer); ok {
		return d.StoreDir(), true
	}
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return "", false
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if f := t.Field(i); f.Tag.Get("koanf") == "dir" && f.Type.Kind() == reflect.String {
			return v.Field(i).String(), v.Field(i).String() != ""
		}
	}
	return "", false
}

// StoreConflicts returns, for an agent that mounts presets, each pair of
// session stores it would hear — at the root or in those presets — that
// keep sessions in the same directory. Two writers of one directory take
// the same session's lock, so the second is locked out at run time (its
// writes fail with SESSION_LOCKED); this finds it before anything starts.
// Pairs of root stores are not listed here: checkStores reports them once.
func (c *Config) StoreConflicts(agentID string, presets []string) []string {
	root := c.storesIn(c.Plugins, "plugins")
	var own []store
	seen := map[string]bool{}
	for _, name := range presets {
		if seen[name] {
			continue
		}
		seen[name] = true
		if list, err := c.Preset(name); err == nil {
			own = append(own, c.storesIn(list, "presets."+name)...)
		}
	}
	var out []string
	all := append(root[:len(root):len(root)], own...)
	for j := len(root); j < len(all); j++ {
		for i := 0; i < j; i++ {
			if all[i].dir == all[j].dir {
				out = append(out, conflict(all[i], all[j], fmt.Sprintf("agent %q's session", agentID)))
			}
		}
	}
	return out
}

func conflict(a, b store, whose string) string {
	return fmt.Sprintf("session stores %s and %s both keep sessions in %q, so each would lock the other out of %s at run time (SESSION_LOCKED); keep one of them, or give them different dir: values",
		a, b, a.dir, whose)
}

// checkStores reports the store pairs StoreConflicts finds for each agent,
// and pairs of root stores sharing a directory.
func (c *Config) checkStores(p *problems) {
	root := c.storesIn(c.Plugins, "plugins")
	for j := range root {
		for i := 0; i < j; i++ {
			if root[i].dir == root[j].dir {
				p.add(root[j].at, conflict(root[i], root[j], "every agent's session"))
			}
		}
	}
	for i, a := range c.Agents {
		for _, msg := range c.StoreConflicts(a.ID, a.PresetNames()) {
			p.add(fmt.Sprintf("agents[%d]", i), msg)
		}
	}
}

// StoreDirs returns the directories of the session stores the config
// enables, on the root and in presets, absolute and clean.
func (c *Config) StoreDirs() []string {
	var out []string
	for _, s := range c.storesIn(c.Plugins, "plugins") {
		out = append(out, s.dir)
	}
	for _, name := range c.DefinedPresets() {
		list, err := c.Preset(name)
		if err != nil {
			continue
		}
		for _, s := range c.storesIn(list, "presets."+name) {
			out = append(out, s.dir)
		}
	}
	return out
}
