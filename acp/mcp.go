package acp

import (
	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/services/sessions"
)

// mcpEntries maps the client's MCP servers onto entries of the mcp plugin
// (one per server) mounted in the session's agent only. Without the
// plugin they are ignored with a warning: the session still works, with
// dsh's own tools.
func (s *Server) mcpEntries(servers []acp.McpServer, cwd string) []sessions.Entry {
	if len(servers) == 0 {
		return nil
	}
	if !s.opts.MCP {
		s.log.Warn("the client's MCP servers are ignored: this dsh binary has no mcp plugin", "servers", len(servers))
		return nil
	}
	var out []sessions.Entry
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
			out = append(out, sessions.Entry{Use: "mcp", Config: map[string]any{
				"name": srv.Stdio.Name, "command": srv.Stdio.Command, "args": args, "env": env, "cwd": cwd}})
		case srv.Http != nil:
			headers := map[string]any{}
			for _, h := range srv.Http.Headers {
				headers[h.Name] = h.Value
			}
			out = append(out, sessions.Entry{Use: "mcp", Config: map[string]any{"name": srv.Http.Name, "url": srv.Http.Url, "headers": headers}})
		default:
			s.log.Warn("an MCP server of a transport dsh does not take (sse, acp) is ignored")
		}
	}
	return out
}
