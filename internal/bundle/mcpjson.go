package bundle

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
)

// Server is one MCP server from a .mcp.json file or a manifest's
// mcpServers, with its placeholders expanded.
type Server struct {
	// Name is the key the file gives the server.
	Name string
	// File names where it was declared, for messages.
	File string
	// Type is stdio or http. (sse servers are reported, not returned.)
	Type    string
	Command string
	Args    []string
	Env     map[string]string
	// Cwd is the stdio server's working directory, absolute; "" leaves
	// it to tools.mcp (dsh's own). The Open Plugins format has it; a
	// relative one starts from the bundle's root, or from the .mcp.json's
	// folder.
	Cwd     string
	URL     string
	Headers map[string]string
}

// MCPFile is what one .mcp.json (or inline mcpServers) yields.
type MCPFile struct {
	Servers []Server
	// Notes name servers that are not mounted, and keys that are ignored,
	// each with the reason.
	Notes []string
	// Vars are the variables of dsh's environment the file's placeholders
	// read.
	Vars []string
}

// ReadMCPJSON reads a project-scope .mcp.json as Claude Code does: an
// object whose "mcpServers" maps names to servers; ${VAR} and
// ${VAR:-default} are expanded from lookup in command, args, env, url and
// headers. A variable that is unset and has no default is an error, where
// Claude Code would start the server with the text as written.
func ReadMCPJSON(file string, lookup func(string) (string, bool)) (*MCPFile, error) {
	p := &problems{}
	x := &expander{lookup: lookup}
	doc, ok := readJSONObject(p, file, file)
	if !ok {
		return nil, p.err("mcp_json "+file, "bundle/mcp-json")
	}
	out := &MCPFile{}
	raw, has := doc["mcpServers"]
	if !has {
		p.add(file, "", `has no "mcpServers" key; a .mcp.json is {"mcpServers": {"name": {"command": "..."}}}`)
		return nil, p.err("mcp_json "+file, "bundle/mcp-json")
	}
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		if k != "mcpServers" {
			out.Notes = append(out.Notes, fmt.Sprintf("%s: key %q is not part of the .mcp.json format; ignored", file, k))
		}
	}
	readServers(p, x, file, "mcpServers", raw, out)
	out.Vars = x.read
	if err := p.err("mcp_json "+file, "bundle/mcp-json"); err != nil {
		return nil, err
	}
	return out, nil
}

// readServers reads the server map at field of file into out.
func readServers(p *problems, x *expander, file, field string, raw any, out *MCPFile) {
	servers, ok := raw.(map[string]any)
	if !ok {
		p.add(file, field, "expected an object mapping server names to servers, got %s", jsonKind(raw))
		return
	}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		at := joinField(field, name)
		obj, ok := servers[name].(map[string]any)
		if !ok {
			p.add(file, at, "expected an object such as {\"command\": \"...\"} or {\"type\": \"http\", \"url\": \"...\"}, got %s", jsonKind(servers[name]))
			continue
		}
		if s, ok := readServer(p, x, file, at, name, obj, out); ok {
			out.Servers = append(out.Servers, s)
		}
	}
}

// The keys Claude Code reads in a server, by transport.
var (
	stdioKeys = []string{"type", "command", "args", "env", "cwd"}
	httpKeys  = []string{"type", "url", "headers"}
	// unmountable keys change what the server needs to work: without
	// them it would fail, so the server is reported rather than started.
	unmountable = map[string]string{
		"headersHelper": "dsh does not run a command to make a server's headers",
		"oauth":         "dsh does not run an OAuth flow for MCP servers",
	}
)

func readServer(p *problems, x *expander, file, at, name string, obj map[string]any, out *MCPFile) (Server, bool) {
	s := Server{Name: name, File: file}
	before := len(p.list)
	str := func(key string) string {
		v, has := obj[key]
		if !has {
			return ""
		}
		sv, ok := v.(string)
		if !ok {
			p.add(file, at+"."+key, "expected a string, got %s", jsonKind(v))
			return ""
		}
		return sv
	}
	s.Type = str("type")
	switch s.Type {
	case "":
		if _, hasURL := obj["url"]; hasURL {
			p.add(file, at, `has a url but no type; add "type": "http" (or "sse")`)
			return s, false
		}
		s.Type = "stdio"
	case "stdio", "http":
	case "sse":
		out.Notes = append(out.Notes, fmt.Sprintf("%s: %s: not mounted: dsh's MCP client speaks stdio and streamable HTTP, not the legacy SSE transport; if the server also serves streamable HTTP, use \"type\": \"http\"", file, at))
		return s, false
	default:
		p.add(file, at+".type", "%q is not a transport; use stdio, http or sse", s.Type)
		return s, false
	}
	allowed := stdioKeys
	if s.Type == "http" {
		allowed = httpKeys
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		if why, bad := unmountable[k]; bad {
			out.Notes = append(out.Notes, fmt.Sprintf("%s: %s: not mounted: it sets %s, and %s", file, at, k, why))
			return s, false
		}
		if !slices.Contains(allowed, k) {
			other := "an http"
			if s.Type == "http" {
				other = "a stdio"
			}
			if slices.Contains(stdioKeys, k) || slices.Contains(httpKeys, k) {
				p.add(file, at+"."+k, "belongs to %s server, not to this %s one", other, s.Type)
				continue
			}
			out.Notes = append(out.Notes, fmt.Sprintf("%s: %s.%s: not a key dsh reads; ignored", file, at, k))
		}
	}
	field := func(key, v string) string {
		e := x.expand(v)
		for _, name := range x.takeMissing() {
			p.add(file, at+"."+key, "%s", missingMessage(name))
		}
		return e
	}
	switch s.Type {
	case "stdio":
		s.Command = field("command", str("command"))
		if s.Command == "" && len(p.list) == before {
			p.add(file, at, `a stdio server needs "command"`)
		}
		s.Args = strList(p, file, at+".args", obj["args"])
		for i := range s.Args {
			s.Args[i] = field(fmt.Sprintf("args[%d]", i), s.Args[i])
		}
		s.Env = strMap(p, file, at+".env", obj["env"])
		for k, v := range s.Env {
			s.Env[k] = field("env."+k, v)
		}
		if cwd := field("cwd", str("cwd")); cwd != "" {
			if !filepath.IsAbs(cwd) {
				base := x.root
				if base == "" {
					base = filepath.Dir(file)
				}
				cwd = filepath.Join(base, cwd)
			}
			s.Cwd = filepath.Clean(cwd)
		}
	case "http":
		s.URL = field("url", str("url"))
		if s.URL == "" && len(p.list) == before {
			p.add(file, at, `an http server needs "url"`)
		}
		s.Headers = strMap(p, file, at+".headers", obj["headers"])
		for k, v := range s.Headers {
			s.Headers[k] = field("headers."+k, v)
		}
	}
	return s, len(p.list) == before
}

func joinField(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}

func missingMessage(name string) string {
	if name == pluginDataVar {
		return "${" + pluginDataVar + "} is not provided by dsh (it has no per-plugin data directory); use a path under ${" + PluginRootVar + "} or an absolute one"
	}
	return fmt.Sprintf("${%s} is not set in dsh's environment and has no default; set %s, or write ${%s:-default}", name, name, name)
}
