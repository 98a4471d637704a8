package main

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
	"github.com/dsh-go/dsh/services/session"
)

// goalConfig writes a config whose scripted model answers replies (YAML
// list items under replies:), with a session store, a fixed session id
// and fast goal check-ins; extra goes under plugins:.
func goalConfig(t *testing.T, store, replies, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	text := "plugins:\n  - use: llm.scripted\n    config:\n      replies:\n" + replies +
		"  - use: session.jsonl\n    config: {dir: " + store + "}\n" + extra +
		"goals:\n  min_backoff: 10ms\n  max_backoff: 50ms\n" +
		"agents:\n  - id: coder\n    provider: scripted\n    session: g1\nlog:\n  level: warn\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// A /goal typed in dsh run is driven until the model reports it
// complete; /goal then shows what it spent.
func TestGoalInDshRunCompletes(t *testing.T) {
	cfg := goalConfig(t, t.TempDir(), `        - text: "looking around"
        - tool_calls: [{name: goal_status, arguments: '{"status": "complete", "reason": "the work is done"}'}]
        - text: "finished"
`, "")
	tty, cmd, scr, pos := startInteractive(t, cfg)
	io.WriteString(tty, "/goal tidy the repository --turns 5\n")
	pos = scr.waitFor(t, pos, "goal active: tidy the repository")
	pos = scr.waitFor(t, pos, "(goal complete: the work is done)")
	io.WriteString(tty, "/goal\n")
	pos = scr.waitFor(t, pos, "goal complete: tidy the repository")
	scr.waitFor(t, pos, "spent 2 turns of 5")
	leaveWithCtrlD(t, tty, cmd, scr)
}

// A goal whose model never reports stops when its turn budget is spent.
func TestGoalInDshRunHitsItsBudget(t *testing.T) {
	cfg := goalConfig(t, t.TempDir(), `        - text: "still working"
          usage: {input_tokens: 100, output_tokens: 20}
`, "")
	tty, cmd, scr, pos := startInteractive(t, cfg)
	io.WriteString(tty, "/goal never ends --turns 3 --tokens 100000\n")
	pos = scr.waitFor(t, pos, "(goal budget-limited: the turn budget is spent: 3 of 3 turns)")
	io.WriteString(tty, "/goal resume\n")
	pos = scr.waitFor(t, pos, "cannot resume: the turn budget is spent")
	io.WriteString(tty, "/goal\n")
	scr.waitFor(t, pos, "spent 3 turns of 3, 360 tokens of 100000")
	leaveWithCtrlD(t, tty, cmd, scr)
}

// policy.cel refusing entry "goal" blocks the goal at its first
// continuation; what the user types still goes through.
func TestGoalInDshRunRefusedByPolicy(t *testing.T) {
	cfg := goalConfig(t, t.TempDir(), "        - text: \"hello there\"\n", `  - use: policy.cel
    config:
      admission:
        - name: no-goals
          when: source.entry == "goal"
          action: refuse
          message: goals are off on this machine
`)
	tty, cmd, scr, pos := startInteractive(t, cfg)
	io.WriteString(tty, "/goal do everything\n")
	pos = scr.waitFor(t, pos, "(goal blocked: admission refused the continuation (")
	pos = scr.waitFor(t, pos, "goals are off on this machine)")
	io.WriteString(tty, "hi\n")
	scr.waitFor(t, pos, "hello there")
	leaveWithCtrlD(t, tty, cmd, scr)
}

// A goal survives a kill -9 of dsh in the middle of its continuation's
// turn: the next dsh run of the session finds it active in the log and
// drives it on, from the principal who set it, until it completes.
func TestAGoalSurvivesAKilledDsh(t *testing.T) {
	store := t.TempDir()
	// The first model never finishes its answer.
	first := goalConfig(t, store, "        - text: \"thinking very slowly about it\"\n", "")
	b, _ := os.ReadFile(first)
	os.WriteFile(first, []byte(strings.Replace(string(b), "      replies:\n", "      delay: 1m\n      replies:\n", 1)), 0o644)
	cmd := exec.Command(dshBin, "run", "--config", first)
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "DSH_CONFIG=")
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close(); cmd.Process.Kill(); cmd.Wait() })
	scr := &screen{}
	go io.Copy(scr, tty)
	pos := scr.waitFor(t, 0, "> ")
	io.WriteString(tty, "/goal ship the release --turns 10\n")
	scr.waitFor(t, pos, "goal active: ship the release")

	// Kill it once the continuation's turn is stored and streaming.
	log := filepath.Join(store, "g1.jsonl")
	deadline := time.Now().Add(15 * time.Second)
	for {
		b, _ := os.ReadFile(log)
		if strings.Contains(string(b), `"type":"turn/start"`) && strings.Contains(string(b), `"entry":"goal"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the continuation never reached the log:\n%s", b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	second := goalConfig(t, store, `        - tool_calls: [{name: goal_status, arguments: '{"status": "complete", "reason": "released"}'}]
        - text: "done"
`, "")
	tty2, cmd2, scr2, pos2 := startInteractive(t, second)
	scr2.waitFor(t, pos2, "(goal complete: released)")
	io.WriteString(tty2, "/goal\n")
	scr2.waitFor(t, pos2, "goal complete: ship the release")
	leaveWithCtrlD(t, tty2, cmd2, scr2)

	evs := readLog(t, log)
	var continuations []session.Event
	var last *session.Goal
	for _, e := range evs {
		if e.Type == session.UserMessage && e.Message.From != nil && e.Message.From.Entry == "goal" {
			continuations = append(continuations, e)
		}
		if e.Type == session.GoalRecorded {
			last = e.Goal
		}
	}
	// One continuation before the kill, one after; both from the person
	// who set the goal, on their own behalf.
	if len(continuations) != 2 {
		t.Fatalf("%d continuations in the log, want 2", len(continuations))
	}
	for _, c := range continuations {
		from := c.Message.From
		if from.Principal.Kind != "user" || from.OnBehalfOf == nil || *from.OnBehalfOf != from.Principal {
			t.Fatalf("a continuation's provenance: %+v", from)
		}
	}
	if last == nil || last.State != session.GoalComplete || last.CheckIns != 2 || last.Reason != "released" {
		t.Fatalf("the log's last goal record: %+v", last)
	}
}

// readLog reads a session.jsonl file.
func readLog(t *testing.T, path string) []session.Event {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []session.Event
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e session.Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// dsh run --goal drives the goal headless and exits with its state.
func TestDshRunGoalExitsWithTheGoalsState(t *testing.T) {
	store := t.TempDir()
	done := goalConfig(t, store, `        - text: "looking around"
        - tool_calls: [{name: goal_status, arguments: '{"status": "complete", "reason": "all tidy"}'}]
        - text: "finished"
`, "")
	o := runDsh(t, "", "run", "--config", done, "--goal", "tidy the repository --turns 5")
	if o.code != 0 || !strings.Contains(o.stderr, "goal complete: tidy the repository") || !strings.Contains(o.stderr, "(all tidy)") ||
		!strings.Contains(o.stdout, "finished") {
		t.Fatalf("a goal that completes: exit %d\nstdout:\n%s\nstderr:\n%s", o.code, o.stdout, o.stderr)
	}

	spent := goalConfig(t, t.TempDir(), "        - text: \"still at it\"\n", "")
	o = runDsh(t, "", "run", "--config", spent, "--goal", "never ends --turns 2")
	if o.code != exitRefused || !strings.Contains(o.stderr, "goal budget-limited") || !strings.Contains(o.stderr, "2 of 2 turns") {
		t.Fatalf("a goal that spends its budget: exit %d\n%s", o.code, o.stderr)
	}
	// --goal resume with a larger budget picks it up where it stopped.
	o = runDsh(t, "", "run", "--config", spent, "--session", "g1", "--goal", "resume --turns 3")
	if o.code != exitRefused || !strings.Contains(o.stderr, "3 of 3 turns") {
		t.Fatalf("resumed with a larger budget: exit %d\n%s", o.code, o.stderr)
	}

	refused := goalConfig(t, t.TempDir(), "        - text: \"hi\"\n", `  - use: policy.cel
    config:
      admission:
        - name: no-goals
          when: source.entry == "goal"
          action: refuse
          message: no goals here
`)
	o = runDsh(t, "", "run", "--config", refused, "--goal", "anything")
	if o.code != exitRefused || !strings.Contains(o.stderr, "goal blocked") || !strings.Contains(o.stderr, "no goals here") {
		t.Fatalf("a goal refused by policy: exit %d\n%s", o.code, o.stderr)
	}

	for _, bad := range [][]string{{"--goal", "pause"}, {"--goal", "x --turns none"}, {"--goal", "x", "-p", "y"}} {
		o = runDsh(t, "", append([]string{"run", "--config", done}, bad...)...)
		if o.code != exitUsage || !strings.Contains(o.stderr, "--goal") {
			t.Fatalf("%q: exit %d\n%s", bad, o.code, o.stderr)
		}
	}
}
