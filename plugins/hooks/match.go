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
				if n == tool || n == claudeName(tool) {
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
	return func(tool string) bool { return re.MatchString(tool) || re.MatchString(claudeName(tool)) }, nil
}

func (m matcher) matches(tool string) bool { return m == nil || m(tool) }
