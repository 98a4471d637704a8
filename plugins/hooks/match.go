package hooks

import (
	"fmt"
	"regexp"
	"strings"
)

// claudeNames maps dsh's built-in tools to the names Claude Code gives
// the same tools, so a matcher written for Claude Code ("Bash",
// "Edit|Write") selects dsh's tools too.
var claudeNames = map[string]string{
	"bash":  "Bash",
	"edit":  "Edit",
	"write": "Write",
	"read":  "Read",
	"glob":  "Glob",
	"grep":  "Grep",
	"list":  "LS",
	// The tools below had no Claude Code name, so a hook for WebFetch or
	// Agent never ran for dsh's counterpart, without a word.
	"web_fetch":      "WebFetch",
	"web_search":     "WebSearch",
	"todo":           "TodoWrite",
	"exit_plan_mode": "ExitPlanMode",
	"skill":          "Skill",
	// tools.agent's default name; Claude Code's subagent tool.
	"agent": "Agent",
}

// formerNames are names Claude Code gave a tool before it renamed it,
// which matchers written then still use: its subagent tool was Task.
var formerNames = map[string]string{"agent": "Task"}

// lacking are Claude Code's tools dsh has no counterpart of, with what
// to match instead where dsh has something near. A matcher naming only
// these never runs in dsh; load says so.
var lacking = map[string]string{
	"MultiEdit":       "dsh's edit makes one replacement a call: match Edit",
	"NotebookEdit":    "dsh has no notebook tool",
	"NotebookRead":    "dsh has no notebook tool; notebooks are read by read",
	"BashOutput":      "dsh's background commands are read by job_output, with other arguments: match job_output",
	"KillShell":       "dsh's background commands are stopped by job_kill, with other arguments: match job_kill",
	"KillBash":        "dsh's background commands are stopped by job_kill, with other arguments: match job_kill",
	"SlashCommand":    "dsh's commands are expanded at admission, not called by the model",
	"AskUserQuestion": "dsh's model asks a person in its answer",
}

// mcpPrefix starts the name Claude Code gives an MCP tool:
// mcp__<server>__<tool>.
const mcpPrefix = "mcp__"

// claudeName is the name a hook sees as tool_name: Claude Code's name for
// a built-in tool that has one; for an MCP tool, which dsh names
// <server>__<tool>, Claude Code's mcp__<server>__<tool>; else dsh's own.
// dsh's built-in tools never have "__" in their names, so the name alone
// tells an MCP tool (a plugin tool named with "__" is taken for one too).
func claudeName(tool string) string {
	if n, ok := claudeNames[tool]; ok {
		return n
	}
	if strings.Contains(tool, "__") && !strings.HasPrefix(tool, mcpPrefix) {
		return mcpPrefix + tool
	}
	return tool
}

// matcher selects tools by name. nil matches every tool.
type matcher func(tool string) bool

// compileMatcher follows Claude Code: "", "*" match every tool; a list of
// plain names ("Bash|Edit") matches those names exactly; anything else is
// a regular expression (Go RE2) searched in the name ("mcp__.*__write").
// A tool matches when its dsh name or its Claude Code name does.
func compileMatcher(m string) (matcher, error) {
	m = strings.TrimSpace(m)
	if m == "" || m == "*" {
		return nil, nil
	}
	if simpleMatcher.MatchString(m) {
		names := strings.Split(m, "|")
		return func(tool string) bool {
			for _, n := range names {
				if n == tool || n == claudeName(tool) || n == formerNames[tool] && n != "" {
					return true
				}
			}
			return false
		}, nil
	}
	re, err := regexp.Compile(m)
	if err != nil {
		return nil, fmt.Errorf("%q is not a regular expression (Go RE2 syntax): %v", m, err)
	}
	return func(tool string) bool {
		old, was := formerNames[tool]
		return re.MatchString(tool) || re.MatchString(claudeName(tool)) || was && re.MatchString(old)
	}, nil
}

func (m matcher) matches(tool string) bool { return m == nil || m(tool) }

// neverRuns says why a matcher of event selects nothing dsh sends, or ""
// when it may run. The tool events are judged on a list of plain names
// only (a regular expression may match a tool of a plugin or a server);
// the events whose matchers select a value from a fixed set are judged on
// the values dsh sends.
func neverRuns(event, m string, compiled matcher) string {
	if compiled == nil {
		return ""
	}
	switch event {
	case PreToolUse, PostToolUse, PostToolUseFailure, PermissionRequest:
		if !simpleMatcher.MatchString(strings.TrimSpace(m)) {
			return ""
		}
		var why []string
		for _, n := range strings.Split(strings.TrimSpace(m), "|") {
			w, ok := lacking[n]
			if !ok {
				return ""
			}
			why = append(why, n+": "+w)
		}
		return "names only Claude Code tools dsh does not have (" + strings.Join(why, "; ") + "); these hooks never run"
	}
	sent, ok := sends[event]
	if !ok {
		return ""
	}
	for _, v := range sent {
		if compiled(v) {
			return ""
		}
	}
	return strings.TrimSpace(fmt.Sprintf("selects none of the values dsh sends for %s (%s); these hooks never run. %s", event, strings.Join(sent, ", "), sendsWhy[event]))
}

// sends are the values dsh gives the matchers of the events whose
// matchers select a value from a fixed set, and sendsWhy what dsh does
// not send of Claude Code's.
var (
	sends = map[string][]string{
		Notification: {"permission_prompt"},
		SessionStart: {"startup", "resume", "compact"},
		SessionEnd:   {"other"},
		PreCompact:   {"manual", "auto"},
	}
	sendsWhy = map[string]string{
		Notification: "Claude Code also sends idle_prompt, auth_success and elicitation_dialog; dsh notifies only when a person is asked to approve a call",
		SessionStart: "Claude Code also sends clear; dsh has no /clear",
		SessionEnd:   "Claude Code also sends clear, logout and prompt_input_exit; dsh does not know why an agent ends, so it sends other",
		PreCompact:   "",
	}
)

// inputDiffers are Claude Code tools dsh maps to one of its own whose
// tool_input has other fields, and what differs: the hook runs, but reads
// nothing where it looks.
var inputDiffers = map[string]string{
	"TodoWrite": "dsh's todo gives tool_input.todos as {id, text, status}, not Claude Code's {content, status, activeForm}: .todos[].content and .activeForm read nothing",
}

// differs says how the tool_input of the Claude Code tools a plain-name
// matcher of a tool event names differs from Claude Code's, or "".
func differs(event, m string) string {
	switch event {
	case PreToolUse, PostToolUse, PostToolUseFailure, PermissionRequest:
	default:
		return ""
	}
	m = strings.TrimSpace(m)
	if !simpleMatcher.MatchString(m) {
		return ""
	}
	var why []string
	for _, n := range strings.Split(m, "|") {
		if w, ok := inputDiffers[n]; ok {
			why = append(why, n+": "+w)
		}
	}
	if len(why) == 0 {
		return ""
	}
	return "runs for a tool whose input differs from Claude Code's (" + strings.Join(why, "; ") + ")"
}
