package hooks_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHooksFilesFromClaudeCodesDocsRunUnchanged loads three hooks files
// as Claude Code's documentation gives them (testdata/claude-docs: the
// guide's Bash command logger and file protection, the reference's MCP
// tool matchers) and runs them against dsh's real bash, file tools and an
// MCP server named memory. Their commands write under ~, so HOME is a
// temp dir; PATH is the system's, so jq and python3 are the plain ones.
func TestHooksFilesFromClaudeCodesDocsRunUnchanged(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
	if err := os.Mkdir(filepath.Join(home, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	var files []any
	for _, f := range []string{"bash-command-log.json", "file-protection.json", "mcp-tools.json"} {
		abs, err := filepath.Abs(filepath.Join("testdata", "claude-docs", f))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, abs)
	}
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "tools.bash", "config": map[string]any{"sandbox": map[string]any{"mode": "off"}}},
			map[string]any{"use": "tools.files"},
			mcpServer("memory"),
			map[string]any{"use": "tools.permission", "config": map[string]any{"rules": []any{map[string]any{"tool": "bash", "decision": "allow"}}}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"files": files}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})

	// The guide's logger: one line per command, from .tool_input.
	if res := r.execute("main", "bash", `{"command":"echo hi > out.txt && cat out.txt"}`); res.IsError {
		t.Fatalf("bash: %+v", res)
	}
	log, _ := os.ReadFile(filepath.Join(home, ".claude", "bash-command-log.txt"))
	if string(log) != "echo hi > out.txt && cat out.txt - No description\n" {
		t.Fatalf("bash-command-log.txt: %q", log)
	}

	// The guide's file protection: exit 2 for .env, by .tool_input.file_path.
	if res := r.execute("main", "write", `{"path":".env","content":"TOKEN=x"}`); !res.IsError || !strings.Contains(res.Content, "denied") {
		t.Fatalf("a write to .env must be blocked: %+v", res)
	}
	if _, err := os.Stat(filepath.Join(r.ws, ".env")); !os.IsNotExist(err) {
		t.Fatalf(".env was written: %v", err)
	}
	if res := r.execute("main", "write", `{"path":"notes.txt","content":"x"}`); res.IsError {
		t.Fatalf("a write elsewhere must run: %+v", res)
	}

	// The reference's MCP matchers: mcp__memory__.* logs; the script of
	// mcp__.*__write.* does not exist here, a non-blocking error.
	if res := r.execute("main", "memory__echo", `{"text":"hello"}`); res.IsError || res.Content != "hello" {
		t.Fatalf("memory__echo: %+v", res)
	}
	if res := r.execute("main", "memory__write_note", `{"text":"note"}`); res.IsError || res.Content != "note" {
		t.Fatalf("memory__write_note: %+v", res)
	}
	ops, _ := os.ReadFile(filepath.Join(home, "mcp-operations.log"))
	if string(ops) != "Memory operation initiated\nMemory operation initiated\n" {
		t.Fatalf("mcp-operations.log: %q", ops)
	}
	contains(t, "log", r.logs.String(), `"/home/user/scripts/validate-mcp-write.py" (`+files[2].(string)+`: hooks.PreToolUse[1].hooks[0]) exited with code 127`)
}
