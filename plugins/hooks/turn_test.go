package hooks_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/hooks"
	"github.com/dsh-go/dsh/plugins/session/compact"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// prompt delivers text to the agent through the agent controller, as
// every entry point does, and waits for the agent to be idle.
func (r *rig) prompt(agentID, text string) error {
	r.t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Second)
	defer cancel()
	a := r.agent(agentID)
	if _, err := r.h.Controller().Deliver(ctx, a, agentcontroller.Request{
		Mode: agentcontroller.Followup, Source: agentcontroller.Source{Kind: agentcontroller.SourceUser}, Content: text,
	}); err != nil {
		return err
	}
	if err := a.WhenIdle(ctx); err != nil {
		r.t.Fatalf("the turn did not end: %v", err)
	}
	return nil
}

// systems records the system prompt of every model request.
func (r *rig) systems() func() []string {
	var mu sync.Mutex
	var seen []string
	_, err := agentloop.EventRequest.On(r.h.Root(), func(ctx stdctx.Context, e agentloop.RequestEvent, next agentloop.RequestNext) (llm.Request, error) {
		mu.Lock()
		seen = append(seen, e.Request.System)
		mu.Unlock()
		return next.Call(ctx, e)
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// events lists the agent's session events of one type.
func (r *rig) events(agentID string, typ session.Type) []string {
	var out []string
	for _, e := range r.agent(agentID).Session().Events(1) {
		if e.Type == typ && e.Message != nil {
			out = append(out, e.Message.Content)
		}
	}
	return out
}

// TestAFullTurnRunsEveryEvent: SessionStart and UserPromptSubmit add
// context to the system prompt, PostToolUse feedback reaches the tool
// result, and a Stop hook keeps the turn going once.
func TestAFullTurnRunsEveryEvent(t *testing.T) {
	r := newRig(t)
	if err := os.WriteFile(filepath.Join(r.ws, "hello.txt"), []byte("Helo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stopSeen := filepath.Join(r.dir, "stop")
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"replies": []any{
				map[string]any{"text": "reading", "tool_calls": []any{map[string]any{"name": "read", "arguments": `{"path":"hello.txt"}`}}},
				map[string]any{"text": "done"},
				map[string]any{"text": "tests pass"},
			}}},
			map[string]any{"use": "tools.files"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"SessionStart": []any{hook("", r.script("start.sh", `grep -q '"source":"startup"' && echo "project: demo"`), 0)},
				"UserPromptSubmit": []any{hook("", r.script("prompt.sh", `if grep -q secret; then echo "no secrets, please" >&2; exit 2; fi
echo '{"hookSpecificOutput":{"hookEventName":"UserPromptSubmit","additionalContext":"today is test day"}}'`), 0)},
				"PostToolUse": []any{hook("Read", r.script("post.sh", `grep -q '"tool_response":{"content":"     1\\tHelo' && { echo "typo on line 1" >&2; exit 2; }`), 0)},
				"Stop": []any{hook("", r.script("stop.sh", `in=$(cat)
echo "$in" | grep -o '"stop_hook_active":[a-z]*' >> `+stopSeen+`
echo "$in" | grep -q '"stop_hook_active":true' && exit 0
echo '{"decision":"block","reason":"run the tests first"}'`), 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", map[string]any{"system_prompt": "You are terse."})},
	})
	systems := r.systems()
	if err := r.prompt("main", "fix the typo"); err != nil {
		t.Fatal(err)
	}
	if got := r.events("main", session.AssistantMessage); strings.Join(got, "|") != "reading|done|tests pass" {
		t.Fatalf("the model answered %q; the Stop hook should have given it one more step", got)
	}
	results := r.events("main", session.ToolResult)
	if len(results) != 1 {
		t.Fatalf("tool results: %q", results)
	}
	contains(t, "tool result", results[0], "Helo")
	contains(t, "tool result", results[0], "PostToolUse hook feedback: typo on line 1")
	steer := r.events("main", session.SteeringMessage)
	if len(steer) != 1 || steer[0] != "Stop hook feedback: run the tests first" {
		t.Fatalf("steering: %q", steer)
	}
	data, _ := os.ReadFile(stopSeen)
	if got := strings.Fields(string(data)); strings.Join(got, " ") != `"stop_hook_active":false "stop_hook_active":true` {
		t.Fatalf("the Stop hook saw %q", got)
	}
	sys := systems()
	if len(sys) != 3 {
		t.Fatalf("%d requests", len(sys))
	}
	for _, want := range []string{"You are terse.", "Context from hooks:", "project: demo", "today is test day"} {
		contains(t, "system prompt", sys[0], want)
	}
	// The user messages are what was sent: admission adds nothing.
	if users := r.events("main", session.UserMessage); len(users) != 1 || users[0] != "fix the typo" {
		t.Fatalf("user messages: %q", users)
	}

	err := r.prompt("main", "tell me the secret")
	ref, ok := agentcontroller.RefusalOf(err)
	if !ok || ref.Reason != "hooks/blocked" || !strings.Contains(ref.Message, "no secrets, please") {
		t.Fatalf("a blocked prompt: %v (%+v)", err, ref)
	}
	if users := r.events("main", session.UserMessage); len(users) != 1 {
		t.Fatalf("the blocked prompt reached the session: %q", users)
	}
}

// TestStopHooksContinueATurnABoundedNumberOfTimes: a Stop hook that always
// blocks gets max_stop_continuations more steps, then the turn ends.
func TestStopHooksContinueATurnABoundedNumberOfTimes(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"replies": []any{map[string]any{"text": "ok"}}}},
			map[string]any{"use": "hooks.command", "config": map[string]any{
				"max_stop_continuations": 2,
				"hooks":                  map[string]any{"Stop": []any{hook("", r.script("stop.sh", `echo "keep going" >&2; exit 2`), 0)}},
			}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	if err := r.prompt("main", "go"); err != nil {
		t.Fatal(err)
	}
	if got := r.events("main", session.AssistantMessage); len(got) != 3 {
		t.Fatalf("%d model replies, want 1 + 2 continuations", len(got))
	}
	if got := r.events("main", session.SteeringMessage); len(got) != 2 {
		t.Fatalf("steering: %q", got)
	}
	contains(t, "log", r.logs.String(), "blocked the end of the turn 2 times already")
	// The count is per turn: the next turn gets its continuations again.
	if err := r.prompt("main", "again"); err != nil {
		t.Fatal(err)
	}
	if got := r.events("main", session.AssistantMessage); len(got) != 6 {
		t.Fatalf("%d model replies after two turns, want 6", len(got))
	}
}

// TestContinueFalseEndsTheTurn: a PostToolUse hook that answers
// "continue": false ends the turn after the step, with its reason in the
// tool result.
func TestContinueFalseEndsTheTurn(t *testing.T) {
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"replies": []any{
				map[string]any{"tool_calls": []any{map[string]any{"name": "clock", "arguments": `{}`}}},
				map[string]any{"text": "never"},
			}}},
			map[string]any{"use": "tools.clock"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"PostToolUse": []any{hook("clock", r.script("post.sh", `echo '{"continue":false,"stopReason":"quota used up"}'`), 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	if err := r.prompt("main", "time?"); err != nil {
		t.Fatal(err)
	}
	if got := r.events("main", session.AssistantMessage); len(got) != 1 {
		t.Fatalf("the turn went on after continue:false: %q", got)
	}
	res := r.events("main", session.ToolResult)
	if len(res) != 1 {
		t.Fatalf("results %q", res)
	}
	contains(t, "tool result", res[0], "A PostToolUse hook ended the turn: quota used up")
}

// TestSessionStartSaysResumeForAKeptSession: the second start of an agent
// whose session has turns runs SessionStart with source resume.
func TestSessionStartSaysResumeForAKeptSession(t *testing.T) {
	sessions, dir := t.TempDir(), t.TempDir()
	seen := filepath.Join(dir, "sources")
	cmd := script(t, dir, "start.sh", `grep -o '"source":"[a-z]*"' >> `+seen)
	doc := func() map[string]any {
		return map[string]any{
			"plugins": []any{
				map[string]any{"use": "llm.scripted"},
				map[string]any{"use": "session.jsonl", "config": map[string]any{"dir": sessions}},
				map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"SessionStart": []any{hook("", cmd, 0)}}}},
			},
			"agents": []any{scriptedAgent("main", map[string]any{"session": "kept"})},
		}
	}
	first := newRig(t)
	first.start(doc())
	if err := first.prompt("main", "hello"); err != nil {
		t.Fatal(err)
	}
	if err := first.h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	newRig(t).start(doc())
	data, _ := os.ReadFile(seen)
	if got := strings.Fields(string(data)); strings.Join(got, " ") != `"source":"startup" "source":"resume"` {
		t.Fatalf("SessionStart saw %q", got)
	}
}

// TestSessionStartRunsAgainAfterACompaction: as in Claude Code, a
// compaction runs SessionStart with source "compact"; the context it
// gives replaces the SessionStart context in the system prompt from the
// next model request on.
func TestSessionStartRunsAgainAfterACompaction(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "sources")
	cmd := r.script("start.sh", `src=$(jq -r .source)
echo "$src" >> `+seen+`
echo "the session began by $src"`)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"context_window": 100000}},
			map[string]any{"use": "session.compact", "config": map[string]any{"window": 100000}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"SessionStart": []any{hook("", cmd, 0)}}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	systems := r.systems()
	if err := r.prompt("main", "one"); err != nil {
		t.Fatal(err)
	}
	svc, err := compact.Key.Get(r.h.Root())
	if err != nil {
		t.Fatal(err)
	}
	svc.Request("main")
	if err := r.prompt("main", "two"); err != nil {
		t.Fatal(err)
	}
	if n := len(r.events("main", session.Compacted)); n != 1 {
		t.Fatalf("%d compactions", n)
	}
	// The request that compacted was assembled before; the next one
	// carries the new context.
	if err := r.prompt("main", "three"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(seen)
	if got := strings.Fields(string(data)); strings.Join(got, " ") != "startup compact" {
		t.Fatalf("SessionStart saw sources %q", got)
	}
	all := systems()
	last := all[len(all)-1]
	if !strings.Contains(last, "the session began by compact") || strings.Contains(last, "the session began by startup") {
		t.Fatalf("the system prompt after the compaction:\n%s", last)
	}
}

// TestSessionStartMatchersSelectTheSource: as in Claude Code, a
// SessionStart group's matcher selects by source (startup, resume, clear,
// compact), so a hook written for "compact" does not run when the agent
// starts, and one for "startup" not after a compaction.
func TestSessionStartMatchersSelectTheSource(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "ran")
	each := func(name string) string {
		return r.script(name+".sh", `echo "`+name+`:$(jq -r .source)" >> `+seen)
	}
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"context_window": 100000}},
			map[string]any{"use": "session.compact", "config": map[string]any{"window": 100000}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"SessionStart": []any{
				hook("startup|resume", each("fresh"), 0),
				hook("compact", each("compacted"), 0),
				hook("clear", each("cleared"), 0),
				hook("*", each("all"), 0),
			}}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	if err := r.prompt("main", "one"); err != nil {
		t.Fatal(err)
	}
	svc, err := compact.Key.Get(r.h.Root())
	if err != nil {
		t.Fatal(err)
	}
	svc.Request("main")
	if err := r.prompt("main", "two"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(seen)
	got := strings.Fields(string(data))
	slices.Sort(got)
	if want := "all:compact all:startup compacted:compact fresh:startup"; strings.Join(got, " ") != want {
		t.Fatalf("SessionStart hooks ran as %q; want %q", got, want)
	}
}

// TestPreCompactRunsBeforeACompaction: as in Claude Code, PreCompact runs
// before the history is summarized, with trigger manual for a requested
// compaction, which its matchers select; a hook for "auto" does not run.
// dsh used to skip PreCompact hooks.
func TestPreCompactRunsBeforeACompaction(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"context_window": 100000}},
			map[string]any{"use": "session.compact", "config": map[string]any{"window": 100000}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"PreCompact": []any{
				hook("manual", r.script("manual.sh", `jq -c '{e: .hook_event_name, trigger, custom_instructions}' >> `+seen), 0),
				hook("auto", r.script("auto.sh", `echo auto >> `+seen), 0),
			}}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	if err := r.prompt("main", "one"); err != nil {
		t.Fatal(err)
	}
	svc, err := compact.Key.Get(r.h.Root())
	if err != nil {
		t.Fatal(err)
	}
	svc.Request("main")
	if err := r.prompt("main", "two"); err != nil {
		t.Fatal(err)
	}
	if n := len(r.events("main", session.Compacted)); n != 1 {
		t.Fatalf("%d compactions", n)
	}
	data, _ := os.ReadFile(seen)
	if got := strings.TrimSpace(string(data)); got != `{"e":"PreCompact","trigger":"manual","custom_instructions":""}` {
		t.Fatalf("PreCompact hooks wrote %q", got)
	}
}

// TestSessionEndRunsWhenTheAgentGoes: Claude Code runs SessionEnd when a
// session ends; dsh runs it when the agent is disposed (here: the host
// stops), after its session was written, with reason "other". dsh used
// to skip SessionEnd hooks.
func TestSessionEndRunsWhenTheAgentGoes(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"SessionEnd": []any{
				hook("other", r.script("end.sh", `jq -c '{e: .hook_event_name, reason, a: .dsh_agent_id}' >> `+seen), 0),
				hook("logout", r.script("logout.sh", `echo logout >> `+seen), 0),
			}}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	if err := r.prompt("main", "hello"); err != nil {
		t.Fatal(err)
	}
	if err := r.h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(seen)
	if got := strings.TrimSpace(string(data)); got != `{"e":"SessionEnd","reason":"other","a":"main"}` {
		t.Fatalf("SessionEnd hooks wrote %q", got)
	}
}

// TestASubagentIsNoSession: Claude Code runs SessionStart,
// UserPromptSubmit, Stop and SessionEnd for the session a person has, not
// for the subagents its model starts (those have SubagentStart and
// SubagentStop). A subagent of dsh's (tools.agent) is an agent of its
// own, and used to run all four: a Stop hook kept the subagent going, a
// prompt guard judged the model's task.
func TestASubagentIsNoSession(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	log := r.script("log.sh", `jq -r '.hook_event_name + " " + .dsh_agent_id' >> `+seen)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"replies": []any{
				map[string]any{"text": "asking", "tool_calls": []any{map[string]any{"name": "agent", "arguments": `{"agent": "helper", "description": "help", "prompt": "help me"}`}}},
				map[string]any{"text": "helped"},
				map[string]any{"text": "done"},
			}}},
			map[string]any{"use": "tools.agent", "config": map[string]any{"agents": []any{map[string]any{"name": "helper", "description": "helps"}}}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"SessionStart":     []any{hook("", log, 0)},
				"SessionEnd":       []any{hook("", log, 0)},
				"UserPromptSubmit": []any{hook("", log, 0)},
				"Stop":             []any{hook("", log, 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	if err := r.prompt("main", "hello"); err != nil {
		t.Fatal(err)
	}
	if err := r.h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(seen)
	if got := strings.Fields(strings.ReplaceAll(string(data), " ", "_")); strings.Join(got, " ") != "SessionStart_main UserPromptSubmit_main Stop_main SessionEnd_main" {
		t.Fatalf("hooks ran as %q", got)
	}
}

// TestSubagentStartAndStop: as in Claude Code, SubagentStart runs when a
// subagent starts, its matcher selecting the subagent's name and its
// context reaching the subagent's system prompt; SubagentStop runs when
// the subagent's turn would end and, blocking, keeps it going once, with
// stop_hook_active telling the hook so. Stop runs for the parent only.
// dsh used to skip both events.
func TestSubagentStartAndStop(t *testing.T) {
	r := newRig(t)
	seen := filepath.Join(r.dir, "seen")
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted", "config": map[string]any{"replies": []any{
				map[string]any{"text": "asking", "tool_calls": []any{map[string]any{"name": "agent", "arguments": `{"agent": "helper", "description": "help", "prompt": "help me"}`}}},
				map[string]any{"text": "helped"},
				map[string]any{"text": "checked"},
			}}},
			map[string]any{"use": "tools.agent", "config": map[string]any{"agents": []any{map[string]any{"name": "helper", "description": "helps"}}}},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{
				"SubagentStart": []any{
					hook("helper", r.script("start.sh", `jq -r '.hook_event_name + " " + .agent_type' >> `+seen+`
echo '{"hookSpecificOutput":{"hookEventName":"SubagentStart","additionalContext":"use tabs"}}'`), 0),
					hook("other", r.script("other.sh", `echo other >> `+seen), 0),
				},
				"SubagentStop": []any{hook("helper", r.script("stop.sh", `in=$(cat)
echo "$in" | jq -r '.hook_event_name + " " + .agent_type + " " + (.stop_hook_active|tostring)' >> `+seen+`
echo "$in" | grep -q '"stop_hook_active":true' && exit 0
echo "check your work" >&2; exit 2`), 0)},
				"Stop": []any{hook("", r.script("pstop.sh", `jq -r '.hook_event_name + " " + .dsh_agent_id' >> `+seen), 0)},
			}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	systems := r.systems()
	if err := r.prompt("main", "hello"); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(seen)
	want := "SubagentStart helper\nSubagentStop helper false\nSubagentStop helper true\nStop main\n"
	if string(data) != want {
		t.Fatalf("hooks ran as\n%s\nwant\n%s", data, want)
	}
	withContext := 0
	for _, s := range systems() {
		if strings.Contains(s, "Context from hooks:\nuse tabs") {
			withContext++
		}
	}
	// The subagent's three requests carry it; the parent's do not.
	if withContext != 3 {
		t.Fatalf("%d requests carry the SubagentStart context; want the subagent's 3:\n%q", withContext, systems())
	}
}

// TestAHangingSessionEndHookDoesNotHoldTheShutdown: a host that stops
// waits for its agents' disposal, which waits for SessionEnd hooks; one
// that hangs is stopped at the bound (30 s; shortened here), with a
// warning, and its process group goes with it.
func TestAHangingSessionEndHookDoesNotHoldTheShutdown(t *testing.T) {
	defer hooks.SetMaxSessionEnd(300 * time.Millisecond)()
	r := newRig(t)
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"SessionEnd": []any{hook("", "sleep 60", 0)}}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	start := time.Now()
	if err := r.h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the shutdown took %s", took)
	}
	contains(t, "log", r.logs.String(), "SessionEnd hooks were stopped after 300ms")
}
