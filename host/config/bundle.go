package config

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/internal/bundle"
	"github.com/dsh-go/dsh/plugin"
)

// A bundle: entry (or mcp_json: entry) is not a plugin: Load replaces it,
// in place, with ordinary entries of dsh's own plugins — one per part the
// bundle declares — so every part passes the seams any entry passes
// (admission, approval, the sandbox, protected paths) and a preset scopes
// them to its agents. The expansion happens while checking, before any
// entry is decoded: a bundle with a defect fails the whole config, so
// nothing of it, or of the rest, is applied.

// The plugins a bundle's parts become.
const (
	hooksPlugin   = "hooks.command"
	mcpPlugin     = "tools.mcp"
	protectPlugin = "protect.paths"
	agentPlugin   = "tools.agent"
)

// The plugins of skills and commands, each with config {paths: [...]};
// variables so tests can check the mechanism with plugins of their own.
var (
	skillsPlugin   = "prompt.skills"
	commandsPlugin = "prompt.commands"
)

// origin records where a generated entry came from.
type origin struct {
	// key is the problem path of the part: plugins[1].bundle[hooks].
	key string
	// what names the source for dsh config check: `bundle "review"`.
	what string
}

// From names the bundle or .mcp.json an entry was made from ("" for an
// entry the config file wrote).
func (e Entry) From() string {
	if e.from == nil {
		return ""
	}
	return e.from.what
}

// expandBundles returns list with each bundle: and mcp_json: entry
// replaced by the entries it stands for.
func (c *Config) expandBundles(list []Entry, at string, p *problems) []Entry {
	if !slices.ContainsFunc(list, func(e Entry) bool { return e.Bundle != "" || e.MCPJSON != "" }) {
		return list
	}
	out := make([]Entry, 0, len(list))
	ids := map[string]string{}
	for i, e := range list {
		key := fmt.Sprintf("%s[%d]", at, i)
		if e.Bundle == "" && e.MCPJSON == "" {
			out = append(out, e)
			continue
		}
		if !c.bundleEntryOK(e, key, p) {
			continue
		}
		var gen []Entry
		var report BundleReport
		if e.Bundle != "" {
			gen, report = c.bundleEntries(e, key, p)
		} else {
			gen, report = c.mcpJSONEntries(e, key, p)
		}
		if gen == nil {
			continue
		}
		if prev, dup := ids[report.ID]; dup {
			p.add(key+".id", fmt.Sprintf("%s %q mounts under the id %q, as %s does; give one of them its own id:", report.Kind, e.Bundle+e.MCPJSON, report.ID, prev))
			continue
		}
		ids[report.ID] = key
		report.At = key
		for _, v := range report.Vars {
			if slices.Contains(providerKeys, v) {
				report.Notes = append(report.Notes, fmt.Sprintf("reads %s, a model provider's key, from dsh's environment and hands it to an MCP server: check that the server needs it", v))
			}
		}
		c.bundles = append(c.bundles, report)
		out = append(out, gen...)
	}
	c.checkServerNames(out, p)
	return out
}

// bundleEntryOK refuses what a bundle: or mcp_json: entry cannot carry.
func (c *Config) bundleEntryOK(e Entry, key string, p *problems) bool {
	kind := "bundle"
	if e.Bundle == "" {
		kind = "mcp_json"
	}
	var extra []string
	if e.Bundle != "" && e.MCPJSON != "" {
		extra = append(extra, "mcp_json")
	}
	if e.Use != "" {
		extra = append(extra, "use")
	}
	if e.Exec != "" {
		extra = append(extra, "exec")
	}
	if len(e.Config) > 0 {
		extra = append(extra, "config")
	}
	for _, k := range e.execOnly() {
		if k != "on_unavailable" {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		p.add(key, fmt.Sprintf("a %s: entry takes only id:, disabled: and on_unavailable:; remove %s (the %s's own files say what it mounts)", kind, strings.Join(extra, ", "), map[string]string{"bundle": "bundle", "mcp_json": "file"}[kind]))
		return false
	}
	switch e.OnUnavailable {
	case "", "fail", "skip":
	default:
		p.add(key+".on_unavailable", fmt.Sprintf("%q is not an option; use fail (an MCP server that does not start fails the start) or skip (start without it and keep retrying)", e.OnUnavailable))
		return false
	}
	return true
}

// bundleEntries reads the bundle of e and makes its entries: the
// protection of its folder first (its hooks and servers run as dsh's
// user, so the agent's tools must not rewrite them), then skills,
// commands, hooks and one entry per MCP server.
func (c *Config) bundleEntries(e Entry, key string, p *problems) ([]Entry, BundleReport) {
	dir := c.ExecPath(e.Bundle)
	b, err := bundle.Load(dir, bundle.EnvLookup(c.environ))
	if err != nil {
		for _, line := range bundle.Problems(err) {
			p.add(key+".bundle", line)
		}
		return nil, BundleReport{}
	}
	id := e.ID
	if id == "" {
		id = b.Name
	}
	what := fmt.Sprintf("bundle %q", id)
	part := func(name string) *origin {
		return &origin{key: fmt.Sprintf("%s.bundle[%s]", key, name), what: what}
	}
	report := BundleReport{ID: id, Kind: "bundle", Path: b.Root, Name: b.Name, Vars: b.Vars, Notes: b.Notes}
	var gen []Entry
	ok := true
	need := func(use, has string) bool {
		if _, found := plugin.Lookup(use); !found {
			p.add(key+".bundle", fmt.Sprintf("bundle %q has %s, and this dsh binary has no %q plugin to mount them; use a dsh built with it, or remove the part from the bundle", id, has, use))
			ok = false
			return false
		}
		return true
	}
	if need(protectPlugin, "hooks, servers and instructions dsh loads from its folder") {
		gen = append(gen, Entry{ID: id + "/protect", Use: protectPlugin, from: part("protect"), Config: map[string]any{
			"paths": []any{map[string]any{"path": b.Root, "what": fmt.Sprintf("the folder of plugin bundle %q: dsh loads its hooks, MCP servers, skills and commands, and runs its hooks and servers as dsh's user", b.Name)}},
		}})
	}
	if len(b.Skills) > 0 && need(skillsPlugin, "skills ("+shown(b, b.Skills)+")") {
		gen = append(gen, Entry{ID: id + "/skills", Use: skillsPlugin, from: part("skills"), Config: map[string]any{"paths": anyList(b.Skills)}})
	}
	// prompt.commands reads folders; a manifest may also name single
	// command files, which are reported rather than widened to their
	// folder (that would mount files the bundle did not name).
	var cmdDirs []string
	for _, path := range b.Commands {
		if st, err := os.Stat(path); err == nil && !st.IsDir() {
			report.Notes = append(report.Notes, fmt.Sprintf("%s: command file not mounted: dsh's commands plugin reads folders of command files; list the folder that holds it instead", shown(b, []string{path})))
			continue
		}
		cmdDirs = append(cmdDirs, path)
	}
	if len(cmdDirs) > 0 && need(commandsPlugin, "commands ("+shown(b, cmdDirs)+")") {
		gen = append(gen, Entry{ID: id + "/commands", Use: commandsPlugin, from: part("commands"), Config: map[string]any{
			// Claude Code's name for a bundle's command: /bundle:name.
			"paths": anyList(cmdDirs), "namespace": b.Name,
		}})
	}
	if len(b.Agents) > 0 && need(agentPlugin, "agents ("+agentNames(b)+")") {
		gen = append(gen, Entry{ID: id + "/agents", Use: agentPlugin, from: part("agents"), Config: agentConfig(id, b)})
	}
	if len(b.Hooks) > 0 && need(hooksPlugin, "hooks ("+strings.Join(b.HookSources, ", ")+")") {
		events := map[string]any{}
		for ev, groups := range b.Hooks {
			events[ev] = groups
		}
		report.Notes = append(report.Notes, renamePluginTools(b)...)
		gen = append(gen, Entry{ID: id + "/hooks", Use: hooksPlugin, from: part(strings.Join(b.HookSources, " ")), Config: map[string]any{
			"hooks": events,
			// Claude Code gives a plugin's hooks the root in the
			// environment as well as in the command text.
			"env": map[string]any{bundle.PluginRootVar: b.Root, bundle.OpenPluginRootVar: b.Root},
		}})
	}
	if len(b.Servers) > 0 && need(mcpPlugin, "MCP servers ("+strings.Join(bundle.ServerNames(b.Servers), ", ")+")") {
		for _, s := range b.Servers {
			cfg, note := serverConfig(s, e.OnUnavailable)
			if note != "" {
				report.Notes = append(report.Notes, note)
			}
			if s.Type == "stdio" {
				env, _ := cfg["env"].(map[string]any)
				if env == nil {
					env = map[string]any{}
				}
				env[bundle.PluginRootVar] = b.Root
				env[bundle.OpenPluginRootVar] = b.Root
				cfg["env"] = env
			}
			gen = append(gen, Entry{ID: id + "/mcp/" + s.Name, Use: mcpPlugin, from: part(s.File + " " + s.Name), Config: cfg})
		}
	}
	if !ok {
		return nil, BundleReport{}
	}
	for i := range gen {
		gen[i].Disabled = e.Disabled
		report.Entries = append(report.Entries, gen[i].ID)
	}
	return gen, report
}

func shown(b *bundle.Bundle, paths []string) string {
	var out []string
	for _, path := range paths {
		rel := strings.TrimPrefix(path, b.Root)
		out = append(out, "."+rel)
	}
	return strings.Join(out, ", ")
}

func anyList(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out[k] = m[k]
	}
	return out
}
