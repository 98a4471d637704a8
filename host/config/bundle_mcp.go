package config

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/internal/bundle"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/plugin"
)

// mcpJSONEntries reads the .mcp.json of e: one tools.mcp entry per server,
// and the file's protection. Naming the file in the config is the
// operator's consent to start what it declares: dsh never reads a
// project's .mcp.json on its own.
func (c *Config) mcpJSONEntries(e Entry, key string, p *problems) ([]Entry, BundleReport) {
	file := c.ExecPath(e.MCPJSON)
	f, err := bundle.ReadMCPJSON(file, bundle.EnvLookup(c.environ))
	if err != nil {
		for _, line := range bundle.Problems(err) {
			p.add(key+".mcp_json", line)
		}
		return nil, BundleReport{}
	}
	id := e.ID
	if id == "" {
		id = e.MCPJSON
	}
	what := fmt.Sprintf("mcp_json %q", e.MCPJSON)
	report := BundleReport{ID: id, Kind: "mcp_json", Path: file, Vars: f.Vars, Notes: f.Notes}
	gen := []Entry{}
	if _, found := plugin.Lookup(protectPlugin); found {
		gen = append(gen, Entry{ID: id + "/protect", Use: protectPlugin, from: &origin{key: key + ".mcp_json", what: what}, Config: map[string]any{
			"paths": []any{map[string]any{"path": file, "what": "an MCP config dsh loads (mcp_json: in its config): its servers run as dsh's user"}},
		}})
	}
	if len(f.Servers) > 0 {
		if _, found := plugin.Lookup(mcpPlugin); !found {
			p.add(key+".mcp_json", fmt.Sprintf("this dsh binary has no %q plugin to start the servers of %s", mcpPlugin, e.MCPJSON))
			return nil, BundleReport{}
		}
	}
	for _, s := range f.Servers {
		cfg, note := serverConfig(s, e.OnUnavailable)
		if note != "" {
			report.Notes = append(report.Notes, note)
		}
		gen = append(gen, Entry{ID: id + "/" + s.Name, Use: mcpPlugin, from: &origin{key: fmt.Sprintf("%s.mcp_json[%s]", key, s.Name), what: what}, Config: cfg})
	}
	for i := range gen {
		gen[i].Disabled = e.Disabled
		report.Entries = append(report.Entries, gen[i].ID)
	}
	return gen, report
}

// serverConfig is the tools.mcp config of s, and a note when its name had
// to change to fit in tool names.
func serverConfig(s bundle.Server, onUnavailable string) (map[string]any, string) {
	name := mcpName(s.Name)
	note := ""
	if name != s.Name {
		note = fmt.Sprintf("%s: server %q is mounted as %q: its tools are named %s__<tool>, and tool names allow only letters, digits, '-' and single '_'", s.File, s.Name, name, name)
	}
	cfg := map[string]any{"name": name}
	if onUnavailable != "" {
		cfg["on_unavailable"] = onUnavailable
	}
	switch s.Type {
	case "http":
		cfg["url"] = s.URL
		if len(s.Headers) > 0 {
			cfg["headers"] = anyMap(s.Headers)
		}
	default:
		cfg["command"] = s.Command
		if len(s.Args) > 0 {
			cfg["args"] = anyList(s.Args)
		}
		if len(s.Env) > 0 {
			cfg["env"] = anyMap(s.Env)
		}
		if s.Cwd != "" {
			cfg["cwd"] = s.Cwd
		}
	}
	return cfg, note
}

// mcpName fits a server's name to tools.mcp's rule (letters, digits, '-',
// single '_', at most 30 characters).
func mcpName(name string) string {
	const max = 30
	if len(name) <= max && mcpNameRule.MatchString(name) {
		return name
	}
	s := mcpNameBad.ReplaceAllString(name, "-")
	s = strings.Trim(s, "-_")
	for strings.Contains(s, "__") {
		s = strings.ReplaceAll(s, "__", "_")
	}
	if len(s) > max {
		s = strings.Trim(s[:max], "-_")
	}
	if s == "" {
		s = "mcp"
	}
	return s
}

var (
	mcpNameRule = lazyregexp.New(`^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$`)
	mcpNameBad  = lazyregexp.New(`[^a-zA-Z0-9_-]+`)
)

// checkServerNames refuses two MCP servers of one name in one list: their
// tools would have the same names in one scope.
func (c *Config) checkServerNames(list []Entry, p *problems) {
	seen := map[string]string{}
	for _, e := range list {
		if e.Use != mcpPlugin || e.Disabled {
			continue
		}
		name, _ := e.Config["name"].(string)
		if name == "" {
			continue
		}
		where := e.From()
		if where == "" {
			where = fmt.Sprintf("entry %q", e.ID)
		}
		if prev, dup := seen[name]; dup && e.from != nil {
			p.add(e.from.key, fmt.Sprintf("MCP server %q of %s has the name of one from %s; their tools would clash (%s__<tool>); mount one of them in a preset, or rename a server in its file", name, where, prev, name))
			continue
		}
		seen[name] = where
	}
}
