package bundle

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestExpandFollowsClaudeCode(t *testing.T) {
	x := &expander{lookup: env("SET=v", "EMPTY=", "LOOP=${SET}"), root: "/b"}
	for in, want := range map[string]string{
		"${SET}":                     "v",
		"${EMPTY:-d}":                "", // set, even to "", wins over the default
		"${UNSET:-d}":                "d",
		"${UNSET:-}":                 "",
		"${UNSET:-a:-b}":             "a:-b",
		"${LOOP}":                    "${SET}", // a replacement is not scanned again
		"$SET and $$":                "$SET and $$",
		"${CLAUDE_PLUGIN_ROOT}/s":    "/b/s",
		"x${SET}y${UNSET:-z}":        "xvyz",
		"${CLAUDE_PLUGIN_ROOT:-no}/": "/b/",
	} {
		if got := x.expand(in); got != want {
			t.Errorf("expand(%q) = %q; want %q", in, got, want)
		}
	}
	if m := x.takeMissing(); m != nil {
		t.Fatalf("missing %v", m)
	}
	if got := x.expand("${NOPE}/${CLAUDE_PLUGIN_DATA}"); got != "${NOPE}/${CLAUDE_PLUGIN_DATA}" {
		t.Fatalf("unset text changed: %q", got)
	}
	if m := x.takeMissing(); !reflect.DeepEqual(m, []string{"NOPE", "CLAUDE_PLUGIN_DATA"}) {
		t.Fatalf("missing %v", m)
	}
}

func readMCP(t *testing.T, content string, lookup func(string) (string, bool)) (*MCPFile, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), ".mcp.json")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return ReadMCPJSON(file, lookup)
}

// TestReadMCPJSONTakesClaudeCodesProjectFile: the project-scope example of
// Claude Code's MCP docs, with each transport and expansion.
func TestReadMCPJSONTakesClaudeCodesProjectFile(t *testing.T) {
	f, err := readMCP(t, `{
  "mcpServers": {
    "shared-server": {"command": "/path/to/server", "args": [], "env": {}},
    "api-server": {"type": "http", "url": "${API_BASE_URL:-https://api.example.com}/mcp", "headers": {"Authorization": "Bearer ${API_KEY}"}},
    "local": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"HOME_DIR": "${HOME}"}}
  }
}`, env("API_KEY=k", "HOME=/root"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Server{
		{Name: "api-server", Type: "http", URL: "https://api.example.com/mcp", Headers: map[string]string{"Authorization": "Bearer k"}},
		{Name: "local", Type: "stdio", Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-everything"}, Env: map[string]string{"HOME_DIR": "/root"}},
		{Name: "shared-server", Type: "stdio", Command: "/path/to/server", Args: []string{}, Env: map[string]string{}},
	}
	for i := range want {
		want[i].File = f.Servers[i].File
	}
	if !reflect.DeepEqual(f.Servers, want) {
		t.Fatalf("servers\n got %+v\nwant %+v", f.Servers, want)
	}
	if !reflect.DeepEqual(f.Vars, []string{"API_KEY", "HOME"}) {
		t.Fatalf("vars %v", f.Vars)
	}
}

func TestReadMCPJSONRefusesWhatItCannotStart(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"missing variable", `{"mcpServers": {"s": {"command": "x", "env": {"TOKEN": "${GITHUB_TOKEN}"}}}}`,
			[]string{"mcpServers.s.env.TOKEN: ${GITHUB_TOKEN} is not set in dsh's environment and has no default"}},
		{"url without type", `{"mcpServers": {"s": {"url": "https://x"}}}`, []string{`mcpServers.s: has a url but no type; add "type": "http"`}},
		{"unknown type", `{"mcpServers": {"s": {"type": "ws", "url": "wss://x"}}}`, []string{`mcpServers.s.type: "ws" is not a transport`}},
		{"mixed keys", `{"mcpServers": {"s": {"command": "x", "headers": {}}}}`, []string{"mcpServers.s.headers: belongs to an http server"}},
		{"no wrapper", `{"s": {"command": "x"}}`, []string{`has no "mcpServers" key`}},
		{"bad args", `{"mcpServers": {"s": {"command": "x", "args": "a b"}}}`, []string{"mcpServers.s.args: expected a list of strings"}},
		{"no command", `{"mcpServers": {"s": {"args": []}}}`, []string{`mcpServers.s: a stdio server needs "command"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readMCP(t, tc.content, env())
			if err == nil {
				t.Fatal("read; want an error")
			}
			containsAll(t, Problems(err), tc.want...)
		})
	}
}
