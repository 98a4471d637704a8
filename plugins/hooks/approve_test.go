package hooks_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/tools"
)

// preToolUse starts a host with the given PreToolUse groups on the root
// and one agent, and fake tools to call.
func (r *rig) preToolUse(groups ...any) *rig {
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"PreToolUse": groups}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash", "read", "write")
	return r
}

func TestPreToolUseExitTwoDeniesWithStderr(t *testing.T) {
	r := newRig(t)
	r.preToolUse(hook("Bash", r.script("no-rm.sh", `grep -q '"rm ' && { echo "rm is not allowed here" >&2; exit 2; }; exit 0`), 0))
	v := r.approve("main", "bash", `{"command":"rm -rf build"}`)
	if v.Decision != tools.Deny || v.Reason != "rm is not allowed here" || v.Source != "hooks.command:PreToolUse" {
		t.Fatalf("got %+v", v)
	}
	// The same hook lets other commands through to bash's own default.
	if v := r.approve("main", "bash", `{"command":"ls"}`); v.Decision != tools.Ask || v.Source != "" {
		t.Fatalf("ls: got %+v", v)
	}
}

func TestPreToolUseJSONDecisions(t *testing.T) {
	cases := []struct {
		out    string
		want   tools.Decision
		reason string
	}{
		{`{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"not on main"}}`, tools.Deny, "not on main"},
		{`{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"are you sure?"}}`, tools.Ask, "are you sure?"},
		// allow skips bash's own default ask
		{`{"hookSpecificOutput":{"permissionDecision":"allow","permissionDecisionReason":"safe"}}`, tools.Allow, "safe"},
		{`{"decision":"block","reason":"old style"}`, tools.Deny, "old style"},
		{`{"decision":"approve"}`, tools.Allow, ""},
		{`{"continue":false,"stopReason":"enough"}`, tools.Deny, "enough"},
		{`{}`, tools.Ask, ""},
	}
	for i, c := range cases {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			r := newRig(t)
			r.preToolUse(hook("", r.script("h.sh", "cat >/dev/null; echo '"+c.out+"'"), 0))
			v := r.approve("main", "bash", `{"command":"make"}`)
			if v.Decision != c.want || v.Reason != c.reason {
				t.Fatalf("%s: got %+v, want %s %q", c.out, v, c.want, c.reason)
			}
		})
	}
}

func TestPreToolUseMatchersTakeClaudeAndDshNames(t *testing.T) {
	r := newRig(t)
	deny := r.script("deny.sh", `echo "matched" >&2; exit 2`)
	r.preToolUse(hook("Edit|Write", deny, 0), hook("^rea", deny, 0))
	for tool, want := range map[string]tools.Decision{"write": tools.Deny, "read": tools.Deny, "bash": tools.Ask} {
		if v := r.approve("main", tool, `{}`); v.Decision != want {
			t.Errorf("%s: got %+v, want %s", tool, v, want)
		}
	}
}

func TestPreToolUsePrecedenceDenyOverAskOverAllow(t *testing.T) {
	r := newRig(t)
	say := func(d string) string {
		return r.script(d+".sh", `echo '{"hookSpecificOutput":{"permissionDecision":"`+d+`","permissionDecisionReason":"`+d+` said so"}}'`)
	}
	allow, ask, deny := say("allow"), say("ask"), say("deny")
	r.preToolUse(
		hook("write", allow, 0), hook("write", ask, 0), hook("write", deny, 0),
		hook("read", allow, 0), hook("read", ask, 0),
		hook("bash", allow, 0),
	)
	for tool, want := range map[string]tools.Decision{"write": tools.Deny, "read": tools.Ask, "bash": tools.Allow} {
		v := r.approve("main", tool, `{}`)
		if v.Decision != want || v.Reason != string(want)+" said so" {
			t.Errorf("%s: got %+v, want %s", tool, v, want)
		}
	}
}

func TestPreToolUseUpdatedInputBecomesTheArguments(t *testing.T) {
	r := newRig(t)
	r.preToolUse(hook("Bash", r.script("pin.sh",
		`echo '{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"make -n"}}}'`), 0))
	v := r.approve("main", "bash", `{"command":"make"}`)
	if v.Decision != tools.Allow || string(v.Arguments) != `{"command":"make -n"}` {
		t.Fatalf("got %+v (arguments %s)", v, v.Arguments)
	}
}

// TestAHookReadsTheEventOnStdinInTheWorkspace checks the documented input
// fields, the working directory and the environment.
func TestAHookReadsTheEventOnStdinInTheWorkspace(t *testing.T) {
	t.Setenv("DSH_TEST_SECRET", "sk-secret")
	t.Setenv("DSH_TEST_PASSED", "passed-through")
	r := newRig(t)
	out := filepath.Join(r.dir, "seen")
	cmd := r.script("record.sh", `cat > `+out+`.json; pwd > `+out+`.pwd; env > `+out+`.env`)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{
				"env":             map[string]any{"TEAM": "core"},
				"env_passthrough": []any{"DSH_TEST_PASSED"},
				"hooks":           map[string]any{"PreToolUse": []any{hook("Bash", cmd, 0)}},
			}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	r.approve("main", "bash", `{"command":"make"}`)
	var in map[string]any
	data, _ := os.ReadFile(out + ".json")
	if err := json.Unmarshal(data, &in); err != nil {
		t.Fatalf("stdin was not JSON: %v: %s", err, data)
	}
	want := map[string]any{"hook_event_name": "PreToolUse", "tool_name": "Bash", "dsh_tool_name": "bash", "cwd": r.ws,
		"dsh_agent_id": "main", "tool_use_id": "call-1", "tool_input": map[string]any{"command": "make"}}
	for k, v := range want {
		if got, _ := json.Marshal(in[k]); string(got) != mustJSON(v) {
			t.Errorf("%s: got %s, want %s", k, got, mustJSON(v))
		}
	}
	if s, _ := in["session_id"].(string); s == "" {
		t.Errorf("no session_id in %s", data)
	}
	pwd, _ := os.ReadFile(out + ".pwd")
	if strings.TrimSpace(string(pwd)) != r.ws {
		t.Errorf("ran in %q, not the workspace %q", pwd, r.ws)
	}
	envs, _ := os.ReadFile(out + ".env")
	for _, want := range []string{"DSH_PROJECT_DIR=" + r.ws, "CLAUDE_PROJECT_DIR=" + r.ws, "TEAM=core", "DSH_HOOK_EVENT=PreToolUse", "DSH_AGENT_ID=main", "DSH_TEST_PASSED=passed-through"} {
		contains(t, "environment", string(envs), want)
	}
	if strings.Contains(string(envs), "sk-secret") {
		t.Error("a variable of dsh's environment the config does not pass reached the hook")
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestATimedOutHookIsKilledWithItsGroup: a hook that outlives its timeout
// is a non-blocking error, and the processes it started are gone after.
func TestATimedOutHookIsKilledWithItsGroup(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(r.dir, "pid")
	r.preToolUse(hook("Bash", r.script("slow.sh", `sleep 300 & echo $! > `+pidFile+`; echo '{"hookSpecificOutput":{"permissionDecision":"deny"}}'; wait`), 1))
	v := r.approve("main", "bash", `{"command":"make"}`)
	if v.Decision != tools.Ask {
		t.Fatalf("a timed-out hook decided: %+v", v)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if pid <= 0 || !goneSoon(pid) {
		t.Fatalf("the hook's background process %d outlived it", pid)
	}
	contains(t, "log", r.logs.String(), "timed out after 1s; its process group was killed")
}

// goneSoon reports whether pid stops running within a second: the group's
// SIGKILL was sent when the hook's stage returned, but the kernel delivers
// it to the group's members on its own time.
func goneSoon(pid int) bool {
	for deadline := time.Now().Add(time.Second); alive(pid); {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

func TestBadJSONCrashesAndOtherExitCodesAreNonBlocking(t *testing.T) {
	cases := map[string]struct{ body, log string }{
		"bad json": {`echo '{"hookSpecificOutput": {"permissionDecision": "deny"'`, "is not valid JSON"},
		"crash":    {`echo boom >&2; kill -SEGV $$`, "killed by signal segmentation fault"},
		"exit 1":   {`echo 'lint failed' >&2; exit 1`, "exited with code 1 (not 0, not 2: a non-blocking error); stderr: lint failed"},
		"unknown":  {`echo '{"hookSpecificOutput":{"permissionDecision":"maybe"}}'`, `"permissionDecision": "maybe", which is not allow, deny or ask`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			r := newRig(t)
			r.preToolUse(hook("", r.script("h.sh", c.body), 0))
			if v := r.approve("main", "bash", `{"command":"make"}`); v.Decision != tools.Ask || v.Source != "" {
				t.Fatalf("a failed hook decided: %+v", v)
			}
			contains(t, "log", r.logs.String(), c.log)
		})
	}
}

// TestPresetHooksHearOnlyTheirAgent mounts hooks in a preset: the other
// agent's calls do not run them.
func TestPresetHooksHearOnlyTheirAgent(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{map[string]any{"use": "llm.scripted"}},
		"presets": map[string]any{"guarded": []any{
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"PreToolUse": []any{hook("Bash", r.script("deny.sh", `echo "guarded agent" >&2; exit 2`), 0)}}}},
		}},
		"agents": []any{scriptedAgent("guarded", map[string]any{"preset": "guarded"}), scriptedAgent("free", nil)},
	})
	r.registerFake("bash")
	if v := r.approve("guarded", "bash", `{"command":"ls"}`); v.Decision != tools.Deny || v.Source != "hooks.command@guarded:PreToolUse" {
		t.Fatalf("guarded: %+v", v)
	}
	if v := r.approve("free", "bash", `{"command":"ls"}`); v.Decision != tools.Ask {
		t.Fatalf("free: %+v", v)
	}
}

// TestARewriteInAPresetSurvivesARootPolicy: tools.permission on the root
// allows the call by a rule; the preset's hook rewrites it, and the
// rewrite is what runs.
func TestARewriteInAPresetSurvivesARootPolicy(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "tools.permission", "config": map[string]any{"rules": []any{map[string]any{"command": "make *", "decision": "allow"}}}},
		},
		"presets": map[string]any{"dry": []any{
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"PreToolUse": []any{hook("Bash", r.script("dry.sh", `echo '{"hookSpecificOutput":{"updatedInput":{"command":"make -n"}}}'`), 0)}}}},
		}},
		"agents": []any{scriptedAgent("main", map[string]any{"preset": "dry"})},
	})
	r.registerFake("bash")
	v := r.approve("main", "bash", `{"command":"make"}`)
	if v.Decision != tools.Allow || string(v.Arguments) != `{"command":"make -n"}` {
		t.Fatalf("got %+v (arguments %s)", v, v.Arguments)
	}
}

// TestAHookAllowDoesNotOverrideAPolicyAsk: on the root, listed after
// tools.permission, the hook runs first; its allow skips bash's own
// default but a policy rule's ask stands.
func TestAHookAllowDoesNotOverrideAPolicyAsk(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "tools.permission", "config": map[string]any{"rules": []any{map[string]any{"command": "git push *", "decision": "ask"}}}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"PreToolUse": []any{hook("Bash", r.script("ok.sh", `echo '{"hookSpecificOutput":{"permissionDecision":"allow"}}'`), 0)}}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	if v := r.approve("main", "bash", `{"command":"git push"}`); v.Decision != tools.Ask || !strings.HasPrefix(v.Source, "tools.permission") {
		t.Fatalf("git push: %+v", v)
	}
	if v := r.approve("main", "bash", `{"command":"ls"}`); v.Decision != tools.Allow || v.Source != "hooks.command:PreToolUse" {
		t.Fatalf("ls: %+v", v)
	}
}

// TestOnTheRootTheLaterEntryJudgesFirst: hooks.command listed after
// tools.permission runs first, so the policy judges the rewritten call.
func TestOnTheRootTheLaterEntryJudgesFirst(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "tools.permission", "config": map[string]any{"rules": []any{
				map[string]any{"command": "rm *", "decision": "deny", "reason": "no rm"},
				map[string]any{"command": "make *", "decision": "allow"},
			}}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"PreToolUse": []any{hook("Bash", r.script("rw.sh", `echo '{"hookSpecificOutput":{"updatedInput":{"command":"rm -f out"}}}'`), 0)}}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	if v := r.approve("main", "bash", `{"command":"make"}`); v.Decision != tools.Deny || !strings.Contains(v.Reason, "no rm") {
		t.Fatalf("the policy did not judge the rewritten call: %+v", v)
	}
}

// TestOutputBeyondTheCapIsCutAndNotTakenAsJSON: a hook that prints more
// than max_output_bytes has its answer cut, which is then not JSON: a
// non-blocking error.
func TestOutputBeyondTheCapIsCutAndNotTakenAsJSON(t *testing.T) {
	r := newRig(t)
	long := strings.Repeat("x", 600)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"max_output_bytes": 256, "hooks": map[string]any{
				"PreToolUse": []any{hook("", r.script("long.sh", `echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"`+long+`"}}'`), 0)}}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	if v := r.approve("main", "bash", `{"command":"make"}`); v.Decision != tools.Ask {
		t.Fatalf("a cut answer decided: %+v", v)
	}
	contains(t, "log", r.logs.String(), "is not valid JSON")
}
