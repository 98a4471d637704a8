package acp

import (
	"fmt"
	"strings"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/services/sessions"
)

// mcpPlugin is the id of the plugin that mounts one MCP server's tools.
const mcpPlugin = "tools.mcp"

// maxServerName is the mcp plugin's limit on a server's name.
const maxServerName = 30

// mcpServer is one of the editor's MCP servers as an entry of the mcp
// plugin: Label is the editor's name for it, Name the plugin's.
type mcpServer struct {
	Label, Name string
	Entry       sessions.Entry
}

// mcpEntries maps the client's MCP servers onto entries of the mcp plugin
// (one per server) mounted in the session's agent only. The servers it
// cannot mount (all of them in a binary without the plugin; an SSE one,
// a transport dsh does not speak and initialize did not offer) come back
// as skipped, so the editor is told of them as of a server that did not
// start: the session still works, with the tools it has.
func (s *Server) mcpEntries(servers []acp.McpServer, cwd string) (out []mcpServer, skipped []unavailable) {
	if len(servers) == 0 {
		return nil, nil
	}
	if !s.opts.MCP {
		s.log.Warn("the client's MCP servers are ignored: this dsh binary has no mcp plugin", "servers", len(servers))
		for _, srv := range servers {
			skipped = append(skipped, unavailable{Label: labelOf(srv), Why: "this dsh binary has no MCP client (the tools.mcp plugin is not compiled in)"})
		}
		return nil, skipped
	}
	taken := map[string]bool{}
	for _, srv := range servers {
		switch {
		case srv.Stdio != nil:
			env := map[string]any{}
			for _, e := range srv.Stdio.Env {
				env[e.Name] = e.Value
			}
			args := make([]any, len(srv.Stdio.Args))
			for i, a := range srv.Stdio.Args {
				args[i] = a
			}
			name := serverName(srv.Stdio.Name, taken)
			out = append(out, mcpServer{Label: srv.Stdio.Name, Name: name, Entry: sessions.Entry{Use: mcpPlugin, Config: map[string]any{
				"name": name, "command": srv.Stdio.Command, "args": args, "env": env, "cwd": cwd}}})
		case srv.Http != nil:
			headers := map[string]any{}
			for _, h := range srv.Http.Headers {
				headers[h.Name] = h.Value
			}
			name := serverName(srv.Http.Name, taken)
			out = append(out, mcpServer{Label: srv.Http.Name, Name: name, Entry: sessions.Entry{Use: mcpPlugin, Config: map[string]any{
				"name": name, "url": srv.Http.Url, "headers": headers}}})
		default:
			s.log.Warn("an MCP server of a transport dsh does not take (sse, acp) is ignored", "server", labelOf(srv))
			skipped = append(skipped, unavailable{Label: labelOf(srv), Why: "dsh's MCP client speaks stdio and streamable HTTP, not SSE " +
				"(initialize offered no mcpCapabilities.sse); if the server also serves streamable HTTP, configure it as an http server"})
		}
	}
	return out, skipped
}

// labelOf is the editor's name for a server.
func labelOf(srv acp.McpServer) string {
	switch {
	case srv.Stdio != nil:
		return srv.Stdio.Name
	case srv.Http != nil:
		return srv.Http.Name
	case srv.Sse != nil:
		return srv.Sse.Name
	}
	return "(unnamed)"
}

// entriesOf is the plugin entries of servers.
func entriesOf(servers []mcpServer) []sessions.Entry {
	var out []sessions.Entry
	for _, srv := range servers {
		out = append(out, srv.Entry)
	}
	return out
}

// serverName turns an editor's name for a server ("My Files", "gh.tools")
// into one the mcp plugin takes as the prefix of tool names: letters,
// digits and dashes, at most 30 characters, unique in the session.
func serverName(name string, taken map[string]bool) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(name) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		switch {
		case ok:
			b.WriteRune(r)
			dash = false
		case !dash && b.Len() > 0:
			b.WriteByte('-')
			dash = true
		}
	}
	base := strings.Trim(b.String(), "-")
	if base == "" {
		base = "mcp"
	}
	if len(base) > maxServerName-3 {
		base = strings.Trim(base[:maxServerName-3], "-")
	}
	out := base
	for i := 2; taken[out]; i++ {
		out = fmt.Sprintf("%s-%d", base, i)
	}
	taken[out] = true
	return out
}
