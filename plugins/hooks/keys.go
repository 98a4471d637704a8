package hooks

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// What dsh reads of a hook entry and of a matcher group. Claude Code
// reads more; a key dsh does not act on would otherwise be dropped by the
// JSON decoder without a word, and a hooks file would silently run
// differently, so each is named in a warning at load.
var (
	hookKeys  = []string{"type", "command", "timeout"}
	groupKeys = []string{"matcher", "hooks"}
	// insteadOf says what dsh does with a hook key Claude Code knows.
	insteadOf = map[string]string{
		"async": "dsh runs the hook synchronously: it delays its stage, and its answer (a block, a decision) is acted on, " +
			"where Claude Code runs it in the background and acts on nothing it says",
		"statusMessage": "dsh shows no status while a hook runs",
		"once":          "dsh runs the hook every time its event fires",
	}
)

// keyWarnings names the keys of a settings file's hook entries and groups
// that dsh does not act on, and what it does instead. Entries of a type
// other than command are skipped whole (and warned about elsewhere), so
// their keys are not listed.
func keyWarnings(origin string, data []byte) []string {
	var doc struct {
		Hooks map[string][]map[string]json.RawMessage `json:"hooks"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return nil
	}
	var out []string
	for _, event := range slices.Sorted(maps.Keys(doc.Hooks)) {
		if !slices.Contains(supported, event) {
			continue
		}
		for gi, g := range doc.Hooks[event] {
			at := fmt.Sprintf("%shooks.%s[%d]", origin, event, gi)
			for _, k := range slices.Sorted(maps.Keys(g)) {
				if !slices.Contains(groupKeys, k) {
					out = append(out, fmt.Sprintf("%s.%s: dsh does not read this key of a matcher group; ignored", at, k))
				}
			}
			var hooks []map[string]json.RawMessage
			if json.Unmarshal(g["hooks"], &hooks) != nil {
				continue
			}
			for hi, h := range hooks {
				var typ string
				_ = json.Unmarshal(h["type"], &typ)
				if typ != "" && typ != "command" {
					continue
				}
				hat := fmt.Sprintf("%s.hooks[%d]", at, hi)
				for _, k := range slices.Sorted(maps.Keys(h)) {
					switch {
					case slices.Contains(hookKeys, k):
					case k == "async" && string(h[k]) == "false", k == "once" && string(h[k]) == "false":
						// Claude Code's default: nothing differs.
					case insteadOf[k] != "":
						out = append(out, fmt.Sprintf("%s.%s: %s", hat, k, insteadOf[k]))
					default:
						out = append(out, fmt.Sprintf("%s.%s: dsh does not read this key of a hook; ignored", hat, k))
					}
				}
			}
		}
	}
	return out
}

// permissionWarning names a settings file's permission rules, which
// Claude Code applies to every tool call and the hooks plugin does not
// read: a deny rule there would otherwise be taken for one that holds.
func permissionWarning(name string, data []byte) string {
	var doc struct {
		Permissions struct {
			Allow []string `json:"allow"`
			Deny  []string `json:"deny"`
			Ask   []string `json:"ask"`
		} `json:"permissions"`
	}
	if json.Unmarshal(data, &doc) != nil {
		return ""
	}
	p := doc.Permissions
	var parts []string
	for _, r := range []struct {
		kind  string
		rules []string
	}{{"deny", p.Deny}, {"ask", p.Ask}, {"allow", p.Allow}} {
		if len(r.rules) > 0 {
			parts = append(parts, fmt.Sprintf("%d %s (%s)", len(r.rules), r.kind, strings.Join(r.rules, ", ")))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%s: permissions: %s rules are not applied: hooks.command reads a settings file's hooks and env only; write them as tools.permission rules to have dsh apply them",
		name, strings.Join(parts, ", "))
}

// disabled reports a settings file's "disableAllHooks": true, with which
// Claude Code runs no hooks at all.
func disabled(data []byte) bool {
	var doc struct {
		DisableAllHooks bool `json:"disableAllHooks"`
	}
	return json.Unmarshal(data, &doc) == nil && doc.DisableAllHooks
}

// unlisted names the Claude Code settings files whose hooks Claude Code
// runs beside a listed .claude/settings.json but dsh does not, because
// they are not in files: the project's settings.json and
// settings.local.json (a listed settings.local.json's settings.json too),
// and the user's ~/.claude/settings.json. Claude Code merges the hooks of
// all of them; dsh runs only the files it is given, so each one left out
// that has hooks is warned about.
func unlisted(files []string) []string {
	abs := func(f string) string {
		a, err := filepath.Abs(f)
		if err != nil {
			return f
		}
		if r, err := filepath.EvalSymlinks(a); err == nil {
			return r
		}
		return a
	}
	listed := map[string]bool{}
	var dirs []string
	for _, f := range files {
		a := abs(f)
		listed[a] = true
		if filepath.Base(filepath.Dir(a)) == ".claude" && strings.HasPrefix(filepath.Base(a), "settings") {
			dirs = append(dirs, filepath.Dir(a))
		}
	}
	if len(dirs) == 0 {
		return nil
	}
	var candidates []string
	for _, d := range dirs {
		candidates = append(candidates, filepath.Join(d, "settings.json"), filepath.Join(d, "settings.local.json"))
	}
	if home, err := os.UserHomeDir(); err == nil && home != "" {
		candidates = append(candidates, filepath.Join(home, ".claude", "settings.json"))
	}
	var out []string
	seen := map[string]bool{}
	for _, c := range candidates {
		a := abs(c)
		if listed[a] || seen[a] {
			continue
		}
		seen[a] = true
		data, err := os.ReadFile(a)
		if err != nil {
			continue
		}
		var doc settings
		if json.Unmarshal(data, &doc) != nil || len(doc.Hooks) == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("%s has hooks, which Claude Code runs beside those of %s, and it is not in files: dsh does not run them; add it to files to run them",
			c, strings.Join(files, ", ")))
	}
	return out
}
