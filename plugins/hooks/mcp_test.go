package hooks_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// serveMCP serves two tools that say their text back, echo and
// write_note, on stdio: the MCP server the tests mount (as "ev", so dsh
// names its tools ev__echo and ev__write_note).
func serveMCP() {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "ev", Version: "1"}, nil)
	for _, name := range []string{"echo", "write_note"} {
		srv.AddTool(&mcpsdk.Tool{Name: name, Description: "says the text back",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}}}`)},
			func(_ stdctx.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
				var args struct{ Text string }
				_ = json.Unmarshal(req.Params.Arguments, &args)
				return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: args.Text}}}, nil
			})
	}
	if err := srv.Run(stdctx.Background(), &mcpsdk.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, "test MCP server:", err)
		os.Exit(1)
	}
}

// mcpServer is the config entry that mounts the test binary as the MCP
// server name, its tools allowed without asking.
func mcpServer(name string) map[string]any {
	return map[string]any{"use": "tools.mcp", "config": map[string]any{
		"name": name, "command": os.Args[0], "env": map[string]any{mcpServerEnv: "1"}, "approval": "allow"}}
}

// TestMatchersWrittenForClaudeCodeSelectMCPTools: Claude Code names an
// MCP tool mcp__<server>__<tool>; hooks written for it, with matchers
// mcp__ev__echo and mcp__.*, run for dsh's ev__echo and read that name.
func TestMatchersWrittenForClaudeCodeSelectMCPTools(t *testing.T) {
	r := newRig(t)
	names := filepath.Join(r.dir, "names")
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			mcpServer("ev"),
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"PreToolUse": []any{
					hook("mcp__.*", `jq -r .tool_name >> `+names, 0),
					hook("mcp__ev__echo", r.script("guard.sh", `if jq -e '.tool_input.text | test("secret")' >/dev/null; then echo "no secrets to ev" >&2; exit 2; fi`), 0),
				},
				"PostToolUse": []any{hook("mcp__ev__.*", `jq -r '"post " + .tool_name' >> `+names, 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	if res := r.execute("main", "ev__echo", `{"text":"hello"}`); res.IsError || res.Content != "hello" {
		t.Fatalf("allowed call: %+v", res)
	}
	res := r.execute("main", "ev__echo", `{"text":"a secret"}`)
	if !res.IsError || !strings.Contains(res.Content, "no secrets to ev") {
		t.Fatalf("the mcp__ev__echo guard did not run: %+v", res)
	}
	got, _ := os.ReadFile(names)
	if want := "mcp__ev__echo\npost mcp__ev__echo\nmcp__ev__echo\n"; string(got) != want {
		t.Fatalf("the hooks read tool_name %q, want %q", got, want)
	}
}
