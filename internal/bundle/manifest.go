package bundle

import (
	"maps"
	"path/filepath"
	"slices"
)

// Manifest locations in the order they are looked for: Claude Code's, then
// the Open Plugins specification's.
var manifestPaths = []string{".claude-plugin/plugin.json", ".plugin/plugin.json"}

// manifest reads and checks the manifest; nil when there is none.
func (l *loader) manifest() map[string]any {
	var found []string
	for _, rel := range manifestPaths {
		if exists(l.b.Root, rel) {
			found = append(found, rel)
		}
	}
	if len(found) == 0 {
		l.b.Name = filepath.Base(l.b.Root)
		if !pluginName.MatchString(l.b.Name) {
			l.p.add(l.b.Root, "", "the bundle has no manifest, so its folder name %q is its name, and that is not a plugin name (lowercase letters, digits and '-'); rename the folder or add .claude-plugin/plugin.json with a name", l.b.Name)
		}
		return nil
	}
	if len(found) > 1 {
		l.note("%s: ignored: the bundle also has %s, which is read instead", found[1], found[0])
	}
	file := found[0]
	path, ok := resolve(l.p, l.b.Root, file, "", "./"+file)
	if !ok {
		return nil
	}
	l.b.Manifest = path
	m, ok := readJSONObject(l.p, path, file)
	if !ok {
		return nil
	}
	l.checkManifest(file, m)
	return m
}

// Manifest fields: metadata dsh only checks, component paths it reads,
// and those of parts it does not support yet.
var (
	metaStrings = []string{"$schema", "version", "description", "homepage", "license"}
	pathFields  = []string{"commands", "agents", "skills", "hooks", "mcpServers"}
	unsupported = map[string]string{
		"outputStyles": "dsh has no output styles",
		"lspServers":   "dsh does not run language servers",
		"monitors":     "dsh does not run background monitors",
		"userConfig":   "dsh does not prompt for plugin options; pass values through the environment",
		"channels":     "dsh has no channels",
		"settings":     "dsh does not take settings from a bundle",
		"dependencies": "dsh does not install a bundle's dependencies; mount each bundle yourself",
	}
)

func (l *loader) checkManifest(file string, m map[string]any) {
	switch name, ok := m["name"].(string); {
	case m["name"] == nil:
		l.p.add(file, "name", `missing; the manifest's one required field, e.g. "name": "my-plugin"`)
	case !ok:
		l.p.add(file, "name", "expected a string, got %s", jsonKind(m["name"]))
	case len(name) > 64 || !pluginName.MatchString(name):
		l.p.add(file, "name", "%q is not a plugin name; use at most 64 lowercase letters and digits in words joined by '-', such as \"code-review\"", name)
	default:
		l.b.Name = name
	}
	for _, k := range metaStrings {
		if v, has := m[k]; has {
			if _, ok := v.(string); !ok {
				l.p.add(file, k, "expected a string, got %s", jsonKind(v))
			}
		}
	}
	if v, has := m["author"]; has {
		switch a := v.(type) {
		case string:
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(a)) {
				if _, ok := a[k].(string); !ok {
					l.p.add(file, "author."+k, "expected a string, got %s", jsonKind(a[k]))
				}
			}
		default:
			l.p.add(file, "author", `expected an object such as {"name": "...", "email": "..."} or a string, got %s`, jsonKind(v))
		}
	}
	if v, has := m["repository"]; has {
		switch v.(type) {
		case string, map[string]any:
		default:
			l.p.add(file, "repository", "expected a URL string or an object, got %s", jsonKind(v))
		}
	}
	if v, has := m["keywords"]; has {
		strList(l.p, file, "keywords", v)
	}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		switch {
		case k == "name" || k == "author" || k == "repository" || k == "keywords" || slices.Contains(metaStrings, k) || slices.Contains(pathFields, k):
		case unsupported[k] != "":
			l.note("%s: %s: not mounted: %s", file, k, unsupported[k])
		default:
			l.note("%s: %s: not a manifest field dsh knows; ignored", file, k)
		}
	}
}
