package permission

import (
	"strings"

	"github.com/dsh-go/dsh/services/tools"
)

// Prompt reports whether v is an ask of tools.permission that no rule
// made: its mode's (workspace-write asks before every bash command), or
// one about a command it cannot read. That is what Claude Code's
// permission prompt is, which a PreToolUse hook's allow skips; an ask
// rule is not, and a hook's allow leaves it standing, as Claude Code
// leaves its ask rules (package hooks).
func Prompt(v tools.Verdict) bool {
	if v.Decision != tools.Ask || !strings.HasPrefix(v.Source, ID) {
		return false
	}
	who, where, ok := strings.Cut(v.Source, ":")
	if !ok || who != ID && !strings.HasPrefix(who, ID+"@") {
		return false
	}
	return strings.HasPrefix(where, "mode=") || where == "unreadable"
}

// hookSource starts the Source of a hooks.command verdict (hooks.ID; that
// package imports this one, so the name is written out here).
const hookSource = "hooks.command"

// hookAllowed reports whether v is a hooks.command hook's allow.
func hookAllowed(v tools.Verdict) bool { return v.Decision == tools.Allow && byHook(v) }

// hookAsked reports whether v is a hooks.command hook's ask.
func hookAsked(v tools.Verdict) bool { return v.Decision == tools.Ask && byHook(v) }

func byHook(v tools.Verdict) bool {
	return strings.HasPrefix(v.Source, hookSource+":") || strings.HasPrefix(v.Source, hookSource+"@")
}

// askedByRule reports whether a rule of this policy asks about one of the
// parts: that ask stands whatever a hook allowed.
func askedByRule(parts []part) bool {
	for _, pt := range parts {
		if pt.decided && pt.rule && pt.v.Decision == tools.Ask {
			return true
		}
	}
	return false
}
