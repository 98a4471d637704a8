package bundle

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// hooks reads hooks/hooks.json, always, and what the manifest's "hooks"
// adds: more files, or the event map inline. Claude Code refuses the
// plugin's hooks when the manifest names hooks/hooks.json again; dsh reads
// it once and says so.
func (l *loader) hooks(file string, m map[string]any) {
	std := ""
	if exists(l.b.Root, defaultHooks) {
		if path, ok := resolve(l.p, l.b.Root, defaultHooks, "", "./"+defaultHooks); ok {
			std = path
			l.hookFile(path)
		}
	}
	v, has := m["hooks"]
	if !has {
		return
	}
	switch x := v.(type) {
	case map[string]any:
		events := x
		if inner, ok := x["hooks"].(map[string]any); ok && len(x) == 1 {
			events = inner // {"hooks": {...}} written inline, as in a file
		}
		l.hookEvents(file, "hooks", events)
		l.b.HookSources = append(l.b.HookSources, file+" (inline)")
	default:
		for _, path := range l.paths(file, "hooks", v) {
			if path == std {
				l.note("%s: hooks: %s is read anyway (it is the default hooks file); listing it again loads it once", file, show(l.b.Root, path))
				continue
			}
			l.hookFile(path)
		}
	}
}

// hookFile reads one hooks file: {"description": "...", "hooks": {...}}.
func (l *loader) hookFile(path string) {
	name := show(l.b.Root, path)[2:]
	doc, ok := readJSONObject(l.p, path, name)
	if !ok {
		return
	}
	events, ok := doc["hooks"].(map[string]any)
	if !ok {
		if doc["hooks"] == nil {
			l.p.add(name, "", `has no "hooks" key; expected {"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "..."}]}]}}`)
		} else {
			l.p.add(name, "hooks", "expected an object mapping events to matcher groups, got %s", jsonKind(doc["hooks"]))
		}
		return
	}
	l.hookEvents(name, "hooks", events)
	l.b.HookSources = append(l.b.HookSources, "./"+name)
}

// hookEvents copies the event map at field of file into b.Hooks, checking
// the shape and replacing ${CLAUDE_PLUGIN_ROOT} in commands. Event names
// and matchers are the hooks plugin's to judge.
func (l *loader) hookEvents(file, field string, events map[string]any) {
	for _, event := range slices.Sorted(maps.Keys(events)) {
		at := field + "." + event
		groups, ok := events[event].([]any)
		if !ok {
			l.p.add(file, at, "expected a list of matcher groups, got %s", jsonKind(events[event]))
			continue
		}
		for gi, g := range groups {
			gat := fmt.Sprintf("%s[%d]", at, gi)
			obj, ok := g.(map[string]any)
			if !ok {
				l.p.add(file, gat, `expected {"matcher": "...", "hooks": [...]}, got %s`, jsonKind(g))
				continue
			}
			out := map[string]any{}
			for _, k := range slices.Sorted(maps.Keys(obj)) {
				if k != "matcher" && k != "hooks" {
					l.note("%s: %s.%s: not a key of a matcher group dsh reads; ignored", file, gat, k)
				}
			}
			if mv, has := obj["matcher"]; has {
				s, ok := mv.(string)
				if !ok {
					l.p.add(file, gat+".matcher", "expected a string, got %s", jsonKind(mv))
					continue
				}
				out["matcher"] = s
			}
			list, ok := obj["hooks"].([]any)
			if !ok {
				l.p.add(file, gat+".hooks", "expected a list of hooks, got %s", jsonKind(obj["hooks"]))
				continue
			}
			var hooks []any
			for hi, h := range list {
				if hook, ok := l.hook(file, fmt.Sprintf("%s.hooks[%d]", gat, hi), h); ok {
					hooks = append(hooks, hook)
				}
			}
			out["hooks"] = hooks
			l.b.Hooks[event] = append(l.b.Hooks[event], out)
		}
	}
}

// ignoredHookKeys are the keys of a command hook dsh drops knowingly, with
// what that changes.
var (
	ignoredHookKeys = map[string]string{
		"async":         "the hook runs before the event goes on, not in the background",
		"statusMessage": "dsh shows no status line for hooks",
		"once":          "the hook runs every time",
	}
)

func (l *loader) hook(file, at string, h any) (map[string]any, bool) {
	obj, ok := h.(map[string]any)
	if !ok {
		l.p.add(file, at, `expected {"type": "command", "command": "..."}, got %s`, jsonKind(h))
		return nil, false
	}
	out := map[string]any{}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		v := obj[k]
		switch {
		case k == "type" || k == "command":
			s, ok := v.(string)
			if !ok {
				l.p.add(file, at+"."+k, "expected a string, got %s", jsonKind(v))
				return nil, false
			}
			if k == "command" {
				s = expandRoot(s, l.b.Root)
			}
			out[k] = s
		case k == "timeout":
			n, ok := v.(json.Number)
			f, err := n.Float64()
			if !ok || err != nil {
				l.p.add(file, at+".timeout", "expected a number of seconds, got %s", jsonKind(v))
				return nil, false
			}
			out[k] = f
		case (k == "async" || k == "once") && v == false:
			// Claude Code's default: nothing differs.
		case ignoredHookKeys[k] != "":
			l.note("%s: %s.%s: ignored: %s", file, at, k, ignoredHookKeys[k])
		default:
			// The keys of other hook types (prompt, url, ...): the hooks
			// plugin skips those hooks and says so.
			if t, _ := obj["type"].(string); t == "" || t == "command" {
				l.note("%s: %s.%s: not a hook key dsh reads; ignored", file, at, k)
			}
		}
	}
	return out, true
}
