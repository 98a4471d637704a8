package acp

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/sessions"
)

// The client's MCP servers become one mcp entry each, with the keys the
// mcp plugin takes. (That the plugin starts them is checked once it is
// merged.)
func TestMCPServersBecomeEntries(t *testing.T) {
	s := &Server{opts: Options{MCP: true}, log: slog.New(slog.DiscardHandler)}
	servers, skipped := s.mcpEntries([]acp.McpServer{
		{Stdio: &acp.McpServerStdio{Name: "fs", Command: "/bin/mcp-fs", Args: []string{"--root", "."}, Env: []acp.EnvVariable{{Name: "TOKEN", Value: "t"}}}},
		{Http: &acp.McpServerHttpInline{Type: "http", Name: "web", Url: "https://example.test/mcp", Headers: []acp.HttpHeader{{Name: "Authorization", Value: "Bearer x"}}}},
		{Sse: &acp.McpServerSseInline{Type: "sse", Name: "old"}},
	}, "/work/project")
	got := entriesOf(servers)
	want := []sessions.Entry{
		{Use: mcpPlugin, Config: map[string]any{"name": "fs", "command": "/bin/mcp-fs", "args": []any{"--root", "."}, "env": map[string]any{"TOKEN": "t"}, "cwd": "/work/project"}},
		{Use: mcpPlugin, Config: map[string]any{"name": "web", "url": "https://example.test/mcp", "headers": map[string]any{"Authorization": "Bearer x"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %#v", got)
	}
	if len(skipped) != 1 || skipped[0].Label != "old" || !strings.Contains(skipped[0].Why, "not SSE") {
		t.Fatalf("the SSE server is not reported: %+v", skipped)
	}
	s.opts.MCP = false
	if got, skipped := s.mcpEntries([]acp.McpServer{{Stdio: &acp.McpServerStdio{Name: "fs", Command: "x"}}}, "/"); got != nil || len(skipped) != 1 || skipped[0].Label != "fs" {
		t.Fatalf("without the mcp plugin: %v, %v", got, skipped)
	}
}

// Editors name servers freely; tool names need a plain prefix, unique in
// the session.
func TestServerNames(t *testing.T) {
	taken := map[string]bool{}
	for _, c := range []struct{ in, want string }{
		{"fs", "fs"},
		{"My Files", "my-files"},
		{"my files", "my-files-2"},
		{"gh.tools__v2", "gh-tools-v2"},
		{"", "mcp"},
		{"日本", "mcp-2"},
		{strings.Repeat("abcdefghij", 5), "abcdefghijabcdefghijabcdefg"},
	} {
		if got := serverName(c.in, taken); got != c.want {
			t.Errorf("serverName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestPermissionOutcomes(t *testing.T) {
	for _, c := range []struct {
		o    acp.RequestPermissionOutcome
		want approval.Choice
	}{
		{acp.NewRequestPermissionOutcomeSelected(optAllowOnce), approval.AllowOnce},
		{acp.NewRequestPermissionOutcomeSelected(optAllowAlways), approval.AllowSession},
		{acp.NewRequestPermissionOutcomeSelected(optReject), approval.Deny},
		{acp.NewRequestPermissionOutcomeSelected("made-up"), approval.Deny},
		{acp.NewRequestPermissionOutcomeCancelled(), approval.Deny},
	} {
		if got := answerOf(c.o); got.Choice != c.want {
			t.Fatalf("%+v → %v", c.o, got)
		}
	}
}
