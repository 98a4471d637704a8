package hooks_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// TestAHookAllowSkipsThePromptButNotARule: a PreToolUse hook on the root
// (a real script reading the command with jq) allows read-only git; the
// agent's preset runs tools.permission in workspace-write mode, which
// asks before every bash command. As in Claude Code, where a hook's
// allow skips the permission prompt but not an ask or deny rule: the
// mode's ask is skipped, the preset's ask rule and deny rule stand.
func TestAHookAllowSkipsThePromptButNotARule(t *testing.T) {
	r := newRig(t)
	allowGit := r.script("git-ok.sh", `case "$(jq -r .tool_input.command)" in
git\ *) echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","permissionDecisionReason":"git is fine"}}' ;;
esac`)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"PreToolUse": []any{hook("Bash", allowGit, 0)}}}},
		},
		"presets": map[string]any{"careful": []any{
			map[string]any{"use": "tools.permission", "config": map[string]any{"mode": "workspace-write", "rules": []any{
				map[string]any{"tool": "bash", "command": "git push *", "decision": "ask"},
				map[string]any{"tool": "bash", "command": "git clean *", "decision": "deny", "reason": "keep untracked files"},
			}}},
		}},
		"agents": []any{scriptedAgent("main", map[string]any{"preset": "careful"})},
	})
	r.registerFake("bash")
	if v := r.approve("main", "bash", `{"command":"git status"}`); v.Decision != tools.Allow || v.Source != "hooks.command:PreToolUse" || v.Reason != "git is fine" {
		t.Errorf("the hook's allow must skip the mode's ask: %+v", v)
	}
	if v := r.approve("main", "bash", `{"command":"make"}`); v.Decision != tools.Ask || !strings.Contains(v.Source, "mode=workspace-write") {
		t.Errorf("a call the hook does not allow is the mode's: %+v", v)
	}
	if v := r.approve("main", "bash", `{"command":"git push"}`); v.Decision != tools.Ask || !strings.HasSuffix(v.Source, ":rules[0]") {
		t.Errorf("an ask rule stands before a hook's allow: %+v", v)
	}
	if v := r.approve("main", "bash", `{"command":"git clean -fdx"}`); v.Decision != tools.Deny || !strings.Contains(v.Reason, "keep untracked files") {
		t.Errorf("a deny rule stands before a hook's allow: %+v", v)
	}
	// One line, two commands: the mode asks about the first, the rule
	// about the second; the rule's ask stands.
	if v := r.approve("main", "bash", `{"command":"git status && git push"}`); v.Decision != tools.Ask || !strings.HasSuffix(v.Source, ":rules[0]") {
		t.Errorf("an ask rule on a later command of the line stands before a hook's allow: %+v", v)
	}
}

// TestAHookAllowSkipsTheModesAskWhicheverRunsFirst: in a preset the
// entries run in the order listed; a hook's allow skips the mode's ask of
// tools.permission listed before it as well as after it, and an ask rule
// stands in both orders.
func TestAHookAllowSkipsTheModesAskWhicheverRunsFirst(t *testing.T) {
	r := newRig(t)
	allow := r.script("ok.sh", `jq -e '.tool_input.command | startswith("make")' >/dev/null &&
echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'; exit 0`)
	hooks := map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"PreToolUse": []any{hook("Bash", allow, 0)}}}}
	policy := map[string]any{"use": "tools.permission", "config": map[string]any{"mode": "workspace-write", "rules": []any{
		map[string]any{"tool": "bash", "command": "make install", "decision": "ask"}}}}
	for name, preset := range map[string][]any{"policy first": {policy, hooks}, "hooks first": {hooks, policy}} {
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			r.start(map[string]any{
				"plugins": []any{map[string]any{"use": "llm.scripted"}},
				"presets": map[string]any{"p": preset},
				"agents":  []any{scriptedAgent("main", map[string]any{"preset": "p"})},
			})
			r.registerFake("bash")
			if v := r.approve("main", "bash", `{"command":"make"}`); v.Decision != tools.Allow || v.Source != "hooks.command@main:PreToolUse" {
				t.Errorf("make: %+v", v)
			}
			if v := r.approve("main", "bash", `{"command":"make install"}`); v.Decision != tools.Ask || !strings.HasSuffix(v.Source, ":rules[0]") {
				t.Errorf("make install: %+v", v)
			}
			if v := r.approve("main", "bash", `{"command":"ls"}`); v.Decision != tools.Ask || !strings.Contains(v.Source, "mode=") {
				t.Errorf("ls: %+v", v)
			}
		})
	}
}

// TestARulesAskInAPresetStandsUnderARootModesAsk: the root's mode asks,
// the preset's rule asks about the same call; a hook's allow skips the
// first, not the second.
func TestARulesAskInAPresetStandsUnderARootModesAsk(t *testing.T) {
	r := newRig(t)
	allow := r.script("ok.sh", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}'`)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "tools.permission", "config": map[string]any{"mode": "workspace-write"}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"PreToolUse": []any{hook("Bash", allow, 0)}}}},
		},
		"presets": map[string]any{"p": []any{map[string]any{"use": "tools.permission", "config": map[string]any{"rules": []any{
			map[string]any{"tool": "bash", "command": "git push *", "decision": "ask"}}}}}},
		"agents": []any{scriptedAgent("main", map[string]any{"preset": "p"})},
	})
	r.registerFake("bash")
	if v := r.approve("main", "bash", `{"command":"git push"}`); v.Decision != tools.Ask || v.Source != "tools.permission@main:rules[0]" {
		t.Errorf("git push: %+v", v)
	}
	if v := r.approve("main", "bash", `{"command":"git status"}`); v.Decision != tools.Allow {
		t.Errorf("git status: %+v", v)
	}
}

// TestAHooksAskInAPresetStandsOverARootAllow: the root's rule allows
// make; the preset's hook asks about it. The hook's author asked for a
// person, and gets one, in either order.
func TestAHooksAskInAPresetStandsOverARootAllow(t *testing.T) {
	r := newRig(t)
	ask := r.script("ask.sh", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"a person checks builds"}}'`)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "tools.permission", "config": map[string]any{"rules": []any{
				map[string]any{"tool": "bash", "command": "make *", "decision": "allow"}}}},
		},
		"presets": map[string]any{"p": []any{map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"PreToolUse": []any{hook("Bash", ask, 0)}}}}}},
		"agents":  []any{scriptedAgent("main", map[string]any{"preset": "p"})},
	})
	r.registerFake("bash")
	if v := r.approve("main", "bash", `{"command":"make"}`); v.Decision != tools.Ask || v.Source != "hooks.command@main:PreToolUse" || v.Reason != "a person checks builds" {
		t.Errorf("make: %+v", v)
	}
}

// TestAHooksAskInAPresetIsReportedOverARootRulesAsk: the root's rule asks
// about git push and the preset's hook asks too. The hook's ask is the one
// reported, so --yolo and --allow (which answer a rule's ask) cannot
// answer what the hook's author wanted a person to decide.
func TestAHooksAskInAPresetIsReportedOverARootRulesAsk(t *testing.T) {
	r := newRig(t)
	ask := r.script("ask.sh", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"ask","permissionDecisionReason":"a person checks pushes"}}'`)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "tools.permission", "config": map[string]any{"rules": []any{
				map[string]any{"tool": "bash", "command": "git push *", "decision": "ask"}}}},
		},
		"presets": map[string]any{"p": []any{map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"PreToolUse": []any{hook("Bash", ask, 0)}}}}}},
		"agents":  []any{scriptedAgent("main", map[string]any{"preset": "p"})},
	})
	r.registerFake("bash")
	if v := r.approve("main", "bash", `{"command":"git push origin"}`); v.Decision != tools.Ask || v.Source != "hooks.command@main:PreToolUse" {
		t.Errorf("git push: %+v", v)
	}
}
