package session_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// turn returns the events of a turn n whose prompt is text and whose
// model answers "re: text" after one tool call.
func turn(n int, text string) []session.Event {
	user := llm.Message{Role: llm.RoleUser, Content: text}
	id := "c" + text
	asst := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: id, Name: "bash"}}}
	res := llm.Message{Role: llm.RoleTool, ToolCallID: id, Content: "ok"}
	done := llm.Message{Role: llm.RoleAssistant, Content: "re: " + text}
	return []session.Event{
		{Type: session.TurnStart, Turn: n},
		{Type: session.UserMessage, Turn: n, Message: &user},
		{Type: session.StepStart, Turn: n, Step: 1},
		{Type: session.AssistantMessage, Turn: n, Step: 1, Message: &asst},
		{Type: session.ToolCall, Turn: n, Step: 1, ToolCall: &asst.ToolCalls[0]},
		{Type: session.Checkpointed, Turn: n, Step: 1, Checkpoint: &session.Checkpoint{CallID: id, Tool: "bash", Scope: "workspace"}},
		{Type: session.ToolResult, Turn: n, Step: 1, Message: &res},
		{Type: session.StepEnd, Turn: n, Step: 1},
		{Type: session.StepStart, Turn: n, Step: 2},
		{Type: session.AssistantMessage, Turn: n, Step: 2, Message: &done},
		{Type: session.StepEnd, Turn: n, Step: 2},
		{Type: session.TurnEnd, Turn: n, Reason: "completed"},
	}
}

func contents(h llm.History) []string {
	var out []string
	for _, m := range h.All() {
		out = append(out, string(m.Role)+":"+m.Content)
	}
	return out
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRewindLeavesUndoneTurnsOutOfTheHistory: a conversation rewind to
// before turn 2 takes turns 2 and 3 out of the history the model is sent,
// live and on replay (a resumed session); a redo brings them back; a
// rewind to before step 2 keeps step 1.
func TestRewindLeavesUndoneTurnsOutOfTheHistory(t *testing.T) {
	ctx := stdctx.Background()
	root, _, s := newSession(t)
	for n, text := range []string{"one", "two", "three"} {
		for _, e := range turn(n+1, text) {
			s.Append(ctx, e)
		}
	}
	full := contents(s.History())
	if len(full) != 12 {
		t.Fatalf("history %v", full)
	}
	ev, err := s.AppendRewind(ctx, session.Rewind{To: session.Point{Turn: 2}, Conversation: true})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Rewind.From != 13 || ev.Rewind.Through != 36 {
		t.Fatalf("rewind undid seqs %d..%d", ev.Rewind.From, ev.Rewind.Through)
	}
	if got := contents(s.History()); !equal(got, full[:4]) {
		t.Fatalf("after the rewind the history is %v, want %v", got, full[:4])
	}
	replayed, err := session.Replay(s.Events(1))
	if err != nil || !equal(contents(replayed), full[:4]) {
		t.Fatalf("replayed history %v (%v)", contents(replayed), err)
	}
	if _, err := s.PointSeq(session.Point{Turn: 3}); !errs.HasCode(err, session.RewindBadPoint) {
		t.Fatalf("a point the rewind undid: %v", err)
	}
	if vis := session.Visible(s.Events(1)); len(vis) != 13 {
		t.Fatalf("%d events visible, want turn 1's 12 and the rewind", len(vis))
	}

	// Redo: the turns are back.
	rw, err := s.Redoable()
	if err != nil || rw.Seq != ev.Seq {
		t.Fatalf("redoable %v %v", rw.Seq, err)
	}
	s.AppendRedo(ctx, session.Rewind{Redo: rw.Seq, Conversation: true})
	if got := contents(s.History()); !equal(got, full) {
		t.Fatalf("after the redo the history is %v", got)
	}
	if _, err := s.Redoable(); !errs.HasCode(err, session.NothingToRedo) {
		t.Fatalf("a second redo: %v", err)
	}

	// To before step 2 of turn 3: its prompt, call and result stay.
	if _, err := s.AppendRewind(ctx, session.Rewind{To: session.Point{Turn: 3, Step: 2}, Conversation: true}); err != nil {
		t.Fatal(err)
	}
	if got := contents(s.History()); !equal(got, full[:11]) {
		t.Fatalf("after a step rewind the history is %v, want %v", got, full[:11])
	}

	// A resumed copy of the log derives the same history.
	st2 := session.NewStore()
	scope, _ := root.Scoped("agent-2")
	r, err := st2.Restore(scope, "agent-2", "s1", s.Events(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := contents(r.History()); !equal(got, full[:11]) {
		t.Fatalf("restored history %v", got)
	}

	// A turn after a rewind leaves nothing to redo.
	for _, e := range turn(4, "four") {
		s.Append(ctx, e)
	}
	if _, err := s.Redoable(); !errs.HasCode(err, session.NothingToRedo) {
		t.Fatalf("redo after a turn: %v", err)
	}
	if _, err := s.AppendRewind(ctx, session.Rewind{To: session.Point{Turn: 9}}); !errs.HasCode(err, session.RewindBadPoint) {
		t.Fatalf("rewind to a turn that never ran: %v", err)
	}
}

func TestParsePoint(t *testing.T) {
	for in, want := range map[string]session.Point{"3": {Turn: 3}, "3.2": {Turn: 3, Step: 2}, " 1 ": {Turn: 1}} {
		if got, err := session.ParsePoint(in); err != nil || got != want {
			t.Errorf("ParsePoint(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"", "0", "x", "3.", "3.0", "-1", "1.2.3"} {
		if _, err := session.ParsePoint(in); !errs.HasCode(err, errs.InvalidArgument) {
			t.Errorf("ParsePoint(%q) = %v", in, err)
		}
	}
}
