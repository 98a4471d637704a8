package hooks_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/tools"
)

// writeJSON writes v as JSON to name, making its folder.
func writeJSON(t *testing.T, name string, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return name
}

// startWithFiles runs a host whose hooks.command entry reads files.
func (r *rig) startWithFiles(files ...string) {
	list := []any{}
	for _, f := range files {
		list = append(list, f)
	}
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"files": list}}},
		"agents":  []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
}

// TestKeysDshDoesNotReadAreWarnedAbout: a hook entry's async,
// statusMessage and once, and keys dsh has never heard of, would be
// dropped by the decoder without a word; each is named at load with what
// dsh does instead, and the hook still runs.
func TestKeysDshDoesNotReadAreWarnedAbout(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	r := newRig(t)
	deny := r.script("deny.sh", `echo "no" >&2; exit 2`)
	file := writeJSON(t, filepath.Join(r.dir, "settings.json"), map[string]any{"hooks": map[string]any{
		"PreToolUse": []any{map[string]any{"matcher": "Bash", "priority": 1, "hooks": []any{
			map[string]any{"type": "command", "command": deny, "async": true, "statusMessage": "checking", "once": true, "shell": "zsh"},
			map[string]any{"type": "command", "command": "true", "async": false},
		}}},
		"SessionStart": []any{hook("", `echo "export NODE_ENV=dev" >> "$CLAUDE_ENV_FILE"`, 0), hook("", `"${CLAUDE_PLUGIN_ROOT}/hooks/start.sh"`, 0)},
	}})
	r.startWithFiles(file)
	if v := r.approve("main", "bash", `{"command":"ls"}`); v.Decision != tools.Deny {
		t.Fatalf("the hook did not run: %+v", v)
	}
	log := r.logs.String()
	contains(t, "log", log, file+": hooks.PreToolUse[0].priority: dsh does not read this key of a matcher group; ignored")
	contains(t, "log", log, file+": hooks.PreToolUse[0].hooks[0].async: dsh runs the hook synchronously")
	contains(t, "log", log, file+": hooks.PreToolUse[0].hooks[0].statusMessage: dsh shows no status")
	contains(t, "log", log, file+": hooks.PreToolUse[0].hooks[0].once: dsh runs the hook every time")
	contains(t, "log", log, file+": hooks.PreToolUse[0].hooks[0].shell: dsh does not read this key of a hook; ignored")
	notContains(t, "log", log, "hooks[1].async")
	contains(t, "log", log, file+": hooks.SessionStart[0].hooks[0].command: uses CLAUDE_ENV_FILE, which dsh does not set")
	contains(t, "log", log, file+": hooks.SessionStart[1].hooks[0].command: uses CLAUDE_PLUGIN_ROOT, which is set only for a plugin's hooks")
}

// TestDisableAllHooksRunsNone: "disableAllHooks": true in any of the
// settings files turns off every hook of the files, as it does in Claude
// Code; a file holding only that key loads. The config's own hooks run.
func TestDisableAllHooksRunsNone(t *testing.T) {
	t.Setenv("HOME", t.TempDir())
	r := newRig(t)
	deny := r.script("deny.sh", `echo "from the file" >&2; exit 2`)
	claude := filepath.Join(r.ws, ".claude")
	shared := writeJSON(t, filepath.Join(claude, "settings.json"), map[string]any{"hooks": map[string]any{"PreToolUse": []any{hook("Bash", deny, 0)}}})
	local := writeJSON(t, filepath.Join(claude, "settings.local.json"), map[string]any{"disableAllHooks": true})
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{
			"files": []any{shared, local},
			"hooks": map[string]any{"PreToolUse": []any{hook("Write", deny, 0)}},
		}}},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash", "write")
	if v := r.approve("main", "bash", `{"command":"ls"}`); v.Decision == tools.Deny {
		t.Fatalf("a hook of a file ran despite disableAllHooks: %+v", v)
	}
	if v := r.approve("main", "write", `{"path":"a","content":""}`); v.Decision != tools.Deny {
		t.Fatalf("the config's own hook did not run: %+v", v)
	}
	contains(t, "log", r.logs.String(), shared+`: its hooks do not run: `+local+` sets "disableAllHooks": true`)
}

// TestSettingsClaudeCodeMergesButAreNotListedAreNamed: Claude Code runs
// the hooks of the project's settings.local.json and the user's
// ~/.claude/settings.json beside .claude/settings.json; dsh runs the
// files it is given, and names each one it leaves out that has hooks.
func TestSettingsClaudeCodeMergesButAreNotListedAreNamed(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	r := newRig(t)
	claude := filepath.Join(r.ws, ".claude")
	shared := writeJSON(t, filepath.Join(claude, "settings.json"), map[string]any{"hooks": map[string]any{"Stop": []any{hook("", "true", 0)}}})
	local := writeJSON(t, filepath.Join(claude, "settings.local.json"), map[string]any{"hooks": map[string]any{"Stop": []any{hook("", "false", 0)}}})
	user := writeJSON(t, filepath.Join(home, ".claude", "settings.json"), map[string]any{"hooks": map[string]any{"PreToolUse": []any{hook("", "false", 0)}}})
	r.startWithFiles(shared)
	log := r.logs.String()
	contains(t, "log", log, local+" has hooks, which Claude Code runs beside those of "+shared+", and it is not in files")
	contains(t, "log", log, user+" has hooks, which Claude Code runs beside")
	notContains(t, "log", log, shared+" has hooks")

	// Listed, they are not named.
	r2 := newRig(t)
	r2.startWithFiles(shared, local, user)
	notContains(t, "log", r2.logs.String(), "which Claude Code runs beside")
}

func notContains(t *testing.T, what, got, unwanted string) {
	t.Helper()
	if strings.Contains(got, unwanted) {
		t.Fatalf("%s: %q contains %q", what, got, unwanted)
	}
}

// TestPreToolUseContextReachesTheModel: Claude Code adds a PreToolUse
// hook's additionalContext to the model's context; dsh appends it to the
// call's result (the next thing the model reads), or to the reason of a
// denied call. It used to be dropped without a word.
func TestPreToolUseContextReachesTheModel(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
			"PreToolUse": []any{
				hook("echo", r.script("allow.sh", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","additionalContext":"the tree is frozen"}}'`), 0),
				hook("write", r.script("deny.sh", `echo '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"read only","additionalContext":"ask the owner"}}'`), 0),
			},
		}}}},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("echo", "write")
	if got := r.execute("main", "echo", `{}`); got.IsError || got.Content != "ran {}\n\nPreToolUse hook context: the tree is frozen" {
		t.Fatalf("allowed call: %+v", got)
	}
	got := r.execute("main", "write", `{}`)
	contains(t, "denied call", got.Content, "read only\n\nPreToolUse hook context: ask the owner")
	// A call that runs later carries no context of an earlier one.
	if got := r.execute("main", "write", `{}`); strings.Count(got.Content, "ask the owner") != 1 {
		t.Fatalf("second denied call: %+v", got)
	}
}

// TestAnswerFieldsDshDoesNotActOnAreLogged: a field of a hook's JSON
// answer dsh does not read (updatedMCPToolOutput, a misspelt key) is
// named in a warning; the fields it reads still count.
func TestAnswerFieldsDshDoesNotActOnAreLogged(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
			"PostToolUse": []any{hook("", r.script("post.sh", `echo '{"decison":"block","hookSpecificOutput":{"hookEventName":"PostToolUse","additionalContext":"seen","updatedMCPToolOutput":"x"}}'`), 0)},
		}}}},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("echo")
	if got := r.execute("main", "echo", `{}`); got.Content != "ran {}\n\nPostToolUse hook context: seen" {
		t.Fatalf("result: %+v", got)
	}
	contains(t, "log", r.logs.String(), "answered decison, hookSpecificOutput.updatedMCPToolOutput, which dsh does not act on; ignored")
}

// TestNotificationRunsWhenAPersonIsAsked: as in Claude Code, Notification
// runs when a permission prompt is shown (notification_type
// permission_prompt, which its matchers select), before the person sees
// the question; a hook for idle_prompt, which dsh never sends, does not
// run. dsh used to skip Notification hooks.
func TestNotificationRunsWhenAPersonIsAsked(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
			"Notification": []any{
				hook("permission_prompt", r.script("notify.sh", `jq -c '{e: .hook_event_name, notification_type, message}' >> `+seen), 0),
				hook("idle_prompt", r.script("idle.sh", `echo idle >> `+seen), 0),
			},
		}}}},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	answers, err := approval.Key.Get(r.h.Root())
	if err != nil {
		t.Fatal(err)
	}
	var before string
	detach, err := answers.Attach("main", func(stdctx.Context, approval.Request) (approval.Answer, error) {
		data, _ := os.ReadFile(seen)
		before = string(data)
		return approval.Answer{Choice: approval.AllowOnce}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer detach()
	if got := r.execute("main", "bash", `{"command":"ls"}`); got.IsError {
		t.Fatalf("the call: %+v", got)
	}
	if want := `{"e":"Notification","notification_type":"permission_prompt","message":"dsh needs your permission to use Bash"}` + "\n"; before != want {
		t.Fatalf("when the person was asked, the hooks had written %q; want %q", before, want)
	}
}

// TestPermissionRequestAnswersForThePerson: as in Claude Code, a call
// that would ask a person runs PermissionRequest first, whose
// decision.behavior allow or deny answers instead (updatedInput rewrites
// the call); a hook with no decision leaves the question to the person.
// A call that asks nobody does not run it. dsh used to skip the event.
func TestPermissionRequestAnswersForThePerson(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
			"PermissionRequest": []any{hook("Bash|Write", r.script("perm.sh", `in=$(cat)
echo "$in" | jq -r '.hook_event_name + " " + .tool_name' >> `+seen+`
case "$(echo "$in" | jq -r .tool_input.command)" in
  ls) echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":{"command":"ls -a"}}}}' ;;
  rm*) echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"no removing"}}}' ;;
esac`), 0)},
		}}}},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash", "write")
	if v := r.approve("main", "bash", `{"command":"ls"}`); v.Decision != tools.Allow || v.Source != "hooks.command:PermissionRequest" || string(v.Arguments) != `{"command":"ls -a"}` {
		t.Fatalf("allow: %+v", v)
	}
	if v := r.approve("main", "bash", `{"command":"rm -r x"}`); v.Decision != tools.Deny || v.Reason != "no removing" {
		t.Fatalf("deny: %+v", v)
	}
	if v := r.approve("main", "bash", `{"command":"make"}`); v.Decision != tools.Ask {
		t.Fatalf("no decision: %+v", v)
	}
	// write asks nobody: no prompt, no hook.
	if v := r.approve("main", "write", `{"path":"a","content":""}`); v.Decision == tools.Ask {
		t.Fatalf("write: %+v", v)
	}
	data, _ := os.ReadFile(seen)
	if got := string(data); got != "PermissionRequest Bash\nPermissionRequest Bash\nPermissionRequest Bash\n" {
		t.Fatalf("the hook ran as %q", got)
	}
}

// TestAMalformedPermissionRequestAllowDoesNotAllow: an allow whose
// updatedInput is no object (a string holding the JSON, an array) names a
// call the hook did not write; running the original instead would allow
// what the hook never saw fit to allow. So would an allow beside
// "continue": false, which Claude Code puts before any decision (as
// PreToolUse does here). Both leave the question to the person.
func TestAMalformedPermissionRequestAllowDoesNotAllow(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}, map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
			"PermissionRequest": []any{hook("Bash", r.script("perm.sh", `case "$(jq -r .tool_input.command)" in
  string) echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":"{\"command\":\"ls\"}"}}}' ;;
  array) echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":[{"command":"ls"}]}}}' ;;
  stop) echo '{"continue":false,"stopReason":"enough","hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow"}}}' ;;
  null) echo '{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"allow","updatedInput":null}}}' ;;
esac`), 0)},
		}}}},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	for _, cmd := range []string{"string", "array"} {
		if v := r.approve("main", "bash", `{"command":"`+cmd+`"}`); v.Decision == tools.Allow {
			t.Errorf("an allow with updatedInput as %s allowed the call: %+v", cmd, v)
		}
	}
	if v := r.approve("main", "bash", `{"command":"stop"}`); v.Decision != tools.Deny || !strings.Contains(v.Reason, "enough") {
		t.Errorf("an allow with continue: false: %+v, want a deny saying why", v)
	}
	// null is no rewrite: the call is allowed as it is.
	if v := r.approve("main", "bash", `{"command":"null"}`); v.Decision != tools.Allow || len(v.Arguments) != 0 {
		t.Errorf("an allow with updatedInput null: %+v", v)
	}
}
