package acp_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// command sends text as a prompt and returns the agent message it was
// answered with: the text of the updates that came after the ones before.
func (e *env) command(id acp.SessionId, text string) (string, error) {
	e.t.Helper()
	before := len(e.c.all())
	r, err := e.prompt(id, text)
	if err != nil {
		return "", err
	}
	if r.StopReason != acp.StopReasonEndTurn {
		e.t.Fatalf("%s: stop %q", text, r.StopReason)
	}
	return agentText(e.c.all()[before:]), nil
}

// TestRewindAndRedoAsCommands: a turn's bash writes a file; "/rewind"
// lists the turn, "/rewind 1 code" through session/prompt removes the
// file and "/redo" puts it back, each answered with an agent message and
// end_turn; none reaches the model. A file changed by hand stops the
// rewind with REWIND_WORKSPACE_CHANGED naming it, --force overwrites it,
// a conversation rewind is answered with a message, and a bad argument is
// invalid params.
func TestRewindAndRedoAsCommands(t *testing.T) {
	args, _ := json.Marshal(map[string]string{"command": "echo hi > new.txt"})
	e := newEnv(t, envOpts{
		replies: []scripted.Reply{{Text: "writing", ToolCalls: []scripted.Call{{Name: "bash", Arguments: string(args)}}}, {Text: "done"}},
		extra:   "  - use: tools.bash\n  - use: session.checkpoints\n",
	})
	id := e.newSession()
	// The editor allows the bash call when asked.
	e.c.answers <- acp.NewRequestPermissionOutcomeSelected("allow-once")
	if r, err := e.prompt(id, "make a file"); err != nil || r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("the turn: %v %v", r, err)
	}
	file := filepath.Join(e.dir, "new.txt")
	exists := func() bool { _, err := os.Stat(file); return err == nil }
	if !exists() {
		t.Fatalf("the turn wrote no %s: %s", file, dump(e.c.all()))
	}
	say, err := e.command(id, "/rewind")
	if err != nil || !strings.Contains(say, "make a file") || !strings.Contains(say, "rewind with /rewind TURN[.STEP]") {
		t.Fatalf("/rewind alone: %q %v", say, err)
	}
	say, err = e.command(id, "/rewind 1 code")
	if err != nil || !strings.Contains(say, "rewound the workspace (0 restored, 1 removed) to before turn 1") {
		t.Fatalf("/rewind 1 code: %q %v", say, err)
	}
	if exists() {
		t.Fatal("the rewind left new.txt")
	}
	say, err = e.command(id, "/redo")
	if err != nil || !strings.Contains(say, "redid the rewind") {
		t.Fatalf("/redo: %q %v", say, err)
	}
	if data, _ := os.ReadFile(file); string(data) != "hi\n" {
		t.Fatalf("after /redo new.txt holds %q", data)
	}

	if err := os.WriteFile(file, []byte("by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = e.command(id, "/rewind 1 code")
	var re *acp.RequestError
	if !errors.As(err, &re) {
		t.Fatalf("rewind over a changed file: %v", err)
	}
	d, _ := re.Data.(map[string]any)
	if d["code"] != string(sessions.WorkspaceChanged) || !strings.Contains(re.Message, "new.txt") || !strings.Contains(jsonOf(d["differs"]), "new.txt") {
		t.Fatalf("rewind over a changed file: %s %v", re.Message, d)
	}
	if !exists() {
		t.Fatal("the refused rewind removed new.txt")
	}
	say, err = e.command(id, "/rewind 1 code --force")
	if err != nil || !strings.Contains(say, "overwrote 1 changed path(s)") || exists() {
		t.Fatalf("forced rewind: %q %v (exists %v)", say, err, exists())
	}
	// A conversation rewind is told as a message: ACP cannot take the
	// turn back out of the editor's view.
	say, err = e.command(id, "/rewind 1 conversation")
	if err != nil || !strings.Contains(say, "rewound the conversation to before turn 1") {
		t.Fatalf("/rewind 1 conversation: %q %v", say, err)
	}
	if say, err := e.command(id, "/rewind"); err != nil || !strings.Contains(say, "nothing to rewind to yet") {
		t.Fatalf("/rewind after the conversation rewind: %q %v", say, err)
	}
	if _, err := e.command(id, "/rewind banana"); rpcCode(err) != -32602 || !strings.Contains(errData(err), `"banana" is none of them`) {
		t.Fatalf("/rewind banana: %v", err)
	}

	users := 0
	for _, ev := range history(t, e.h.Sessions(), string(id)) {
		if ev.Type == session.UserMessage {
			users++
		}
	}
	if users != 1 {
		t.Fatalf("%d user messages: the commands reached the model", users)
	}
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestGoalAsCommand: "/goal finish it" sets the session's goal and answers
// at once; the scripted model works on it and completes it through
// goal_status; "/goal" then shows it complete. A bad flag is invalid
// params.
func TestGoalAsCommand(t *testing.T) {
	e := newEnv(t, envOpts{top: "goals:\n  min_backoff: 5ms\n  max_backoff: 20ms\n", replies: []scripted.Reply{
		{Text: "looking around"},
		{ToolCalls: []scripted.Call{{Name: "goal_status", Arguments: `{"status":"complete","reason":"all done"}`}}},
		{Text: "finished"},
	}})
	id := e.newSession()
	// The editor allows the goal_status call when asked.
	e.c.answers <- acp.NewRequestPermissionOutcomeSelected("allow-once")
	say, err := e.command(id, "/goal finish it")
	if err != nil || !strings.Contains(say, "goal active: finish it") {
		t.Fatalf("/goal finish it: %q %v", say, err)
	}
	svc := e.h.Sessions()
	deadline := time.Now().Add(wait)
	for {
		g, err := svc.Goal(e.ctx(), string(id), sessions.GoalRequest{Op: sessions.GoalShow})
		if err != nil {
			t.Fatal(err)
		}
		if g.State == session.GoalComplete {
			if g.Reason != "all done" || g.By != "model" {
				t.Fatalf("complete: %+v", g)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the goal never completed: %+v", g)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := svc.Idle(e.ctx(), string(id)); err != nil {
		t.Fatal(err)
	}
	e.c.waitFor(t, "the goal's turns", func(u acp.SessionUpdate) bool {
		return u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil && strings.Contains(u.AgentMessageChunk.Content.Text.Text, "finished")
	})
	say, err = e.command(id, "/goal")
	if err != nil || !strings.Contains(say, "goal complete: finish it") || !strings.Contains(say, "(all done)") {
		t.Fatalf("/goal: %q %v", say, err)
	}
	if _, err := e.command(id, "/goal go --turns many"); rpcCode(err) != -32602 || !strings.Contains(errData(err), `--turns "many" is not a positive whole number`) {
		t.Fatalf("bad flag: %v %s", err, errData(err))
	}
}
