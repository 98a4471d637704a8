package bundle

import (
	"path/filepath"
	"slices"
)

// servers reads the bundle's MCP servers: .mcp.json at the root (which may
// map names to servers directly, or wrap them in "mcpServers"), then the
// manifest's mcpServers — files, or the server map inline — whose
// servers win over the file's of the same name, as Claude Code merges them.
func (l *loader) servers(file string, m map[string]any) {
	byName := map[string]int{}
	add := func(f *MCPFile) {
		for _, s := range f.Servers {
			if i, dup := byName[s.Name]; dup {
				l.note("%s: mcpServers.%s: replaces the server of that name in %s", s.File, s.Name, l.b.Servers[i].File)
				l.b.Servers[i] = s
				continue
			}
			byName[s.Name] = len(l.b.Servers)
			l.b.Servers = append(l.b.Servers, s)
		}
		l.b.Notes = append(l.b.Notes, f.Notes...)
	}
	if exists(l.b.Root, defaultMCP) {
		if path, ok := resolve(l.p, l.b.Root, defaultMCP, "", "./"+defaultMCP); ok {
			add(l.serverFile(path))
		}
	}
	v, has := m["mcpServers"]
	if !has {
		return
	}
	if inline, ok := v.(map[string]any); ok {
		out := &MCPFile{}
		readServers(l.p, l.x, file, "mcpServers", inline, out)
		add(out)
		return
	}
	for _, path := range l.paths(file, "mcpServers", v) {
		if path == filepath.Join(l.b.Root, defaultMCP) {
			continue // read above
		}
		add(l.serverFile(path))
	}
}

// serverFile reads a bundle's MCP file.
func (l *loader) serverFile(path string) *MCPFile {
	name := show(l.b.Root, path)[2:]
	out := &MCPFile{}
	doc, ok := readJSONObject(l.p, path, name)
	if !ok {
		return out
	}
	if inner, has := doc["mcpServers"]; has {
		readServers(l.p, l.x, name, "mcpServers", inner, out)
		return out
	}
	// Claude Code's plugin docs also show the server map unwrapped.
	readServers(l.p, l.x, name, "", doc, out)
	return out
}

// ServerNames returns the names of servers, sorted.
func ServerNames(servers []Server) []string {
	var out []string
	for _, s := range servers {
		out = append(out, s.Name)
	}
	slices.Sort(out)
	return out
}
