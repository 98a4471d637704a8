package hooks_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// TestClaudeCodeNamesOfDshsOtherTools: dsh's web_fetch, web_search,
// todo, exit_plan_mode, skill and agent are Claude Code's WebFetch,
// WebSearch, TodoWrite, ExitPlanMode, Skill and Agent (once Task). A hook
// for WebFetch used to never run, without a word, and tool_name was
// dsh's own name.
func TestClaudeCodeNamesOfDshsOtherTools(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	record := r.script("record.sh", `jq -c '{tool_name, dsh_tool_name, subagent_type: .tool_input.subagent_type}' >> `+seen)
	block := r.script("block.sh", `echo "no fetching from hooks-land" >&2; exit 2`)
	r.preToolUse(
		hook("WebFetch", block, 0),
		hook("WebSearch|TodoWrite|ExitPlanMode|Skill", record, 0),
		// Matchers written before Claude Code renamed Task still select it.
		hook("Task", record, 0),
		hook("^Ta.k$", r.script("regex.sh", `echo regex >> `+seen+`.regex`), 0),
	)
	r.registerFake("web_fetch", "web_search", "todo", "exit_plan_mode", "skill", "agent")
	if v := r.approve("main", "web_fetch", `{"url":"https://example.com"}`); v.Decision != tools.Deny || v.Reason != "no fetching from hooks-land" {
		t.Fatalf("a WebFetch hook did not judge web_fetch: %+v", v)
	}
	for _, c := range []struct{ tool, args string }{
		{"web_search", `{"query":"go"}`},
		{"todo", `{"todos":[]}`},
		{"exit_plan_mode", `{"plan":"p"}`},
		{"skill", `{"name":"pdf"}`},
		{"agent", `{"agent":"helper","description":"d","prompt":"p"}`},
	} {
		if v := r.approve("main", c.tool, c.args); v.Decision == tools.Deny {
			t.Fatalf("%s: %+v", c.tool, v)
		}
	}
	data, _ := os.ReadFile(seen)
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var in struct {
			ToolName     string `json:"tool_name"`
			DshToolName  string `json:"dsh_tool_name"`
			SubagentType string `json:"subagent_type"`
		}
		if err := json.Unmarshal([]byte(l), &in); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, in.ToolName+"/"+in.DshToolName+"/"+in.SubagentType)
	}
	want := "WebSearch/web_search/ TodoWrite/todo/ ExitPlanMode/exit_plan_mode/ Skill/skill/ Agent/agent/helper"
	if strings.Join(got, " ") != want {
		t.Fatalf("hooks saw\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if data, _ := os.ReadFile(seen + ".regex"); string(data) != "regex\n" {
		t.Fatalf("a regular expression for Task ran %q times for agent", data)
	}
}

// TestMatchersThatNeverRunAreNamedAtLoad: a matcher that selects nothing
// dsh sends (a Claude Code tool dsh lacks, a notification type or a
// session end reason dsh never gives) used to load and never run,
// silently. Load now names each one, and only those.
func TestMatchersThatNeverRunAreNamedAtLoad(t *testing.T) {
	r := newRig(t)
	cmd := r.script("noop.sh", `true`)
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
			"PreToolUse": []any{
				hook("NotebookEdit|MultiEdit", cmd, 0),
				hook("Edit|MultiEdit|Write", cmd, 0),
				hook("mcp__.*", cmd, 0),
				hook("my_plugin_tool", cmd, 0),
			},
			"PostToolUse":  []any{hook("BashOutput", cmd, 0)},
			"Notification": []any{hook("idle_prompt", cmd, 0), hook("permission_prompt|idle_prompt", cmd, 0)},
			"SessionStart": []any{hook("clear", cmd, 0), hook("startup", cmd, 0)},
			"SessionEnd":   []any{hook("logout|prompt_input_exit", cmd, 0), hook("other", cmd, 0)},
			"PreCompact":   []any{hook("auto", cmd, 0)},
		}}}},
		"agents": []any{scriptedAgent("main", nil)},
	})
	l := r.logs.String()
	for _, want := range []string{
		`hooks.PreToolUse[0].matcher: "NotebookEdit|MultiEdit" names only Claude Code tools dsh does not have (NotebookEdit: dsh has no notebook tool; MultiEdit: dsh's edit makes one replacement a call: match Edit); these hooks never run`,
		`hooks.PostToolUse[0].matcher: "BashOutput" names only Claude Code tools dsh does not have (BashOutput: dsh's background commands are read by job_output`,
		`hooks.Notification[0].matcher: "idle_prompt" selects none of the values dsh sends for Notification (permission_prompt); these hooks never run`,
		`hooks.SessionStart[0].matcher: "clear" selects none of the values dsh sends for SessionStart (startup, resume, compact)`,
		`hooks.SessionEnd[0].matcher: "logout|prompt_input_exit" selects none of the values dsh sends for SessionEnd (other)`,
	} {
		contains(t, "log", l, want)
	}
	if n := strings.Count(l, "never run"); n != 5 {
		t.Fatalf("%d warnings of hooks that never run, want 5:\n%s", n, l)
	}
}

// TestATodoWriteHookIsToldItsInputDiffers: TodoWrite now matches dsh's
// todo, whose todos are {id, text, status}: a hook reading Claude Code's
// .todos[].content would read nothing, silently. Load names the
// difference for a matcher naming TodoWrite, and only for it.
func TestATodoWriteHookIsToldItsInputDiffers(t *testing.T) {
	r := newRig(t)
	cmd := r.script("noop.sh", `true`)
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
			"PreToolUse":  []any{hook("TodoWrite", cmd, 0), hook("Edit|Write", cmd, 0)},
			"PostToolUse": []any{hook("Bash|TodoWrite", cmd, 0)},
		}}}},
		"agents": []any{scriptedAgent("main", nil)},
	})
	l := r.logs.String()
	contains(t, "log", l, `hooks.PreToolUse[0].matcher: "TodoWrite" runs for a tool whose input differs from Claude Code's (TodoWrite: dsh's todo gives tool_input.todos as {id, text, status}`)
	contains(t, "log", l, `hooks.PostToolUse[0].matcher: "Bash|TodoWrite" runs for a tool whose input differs`)
	if n := strings.Count(l, "input differs"); n != 2 {
		t.Fatalf("%d warnings of a differing input, want 2:\n%s", n, l)
	}
}
