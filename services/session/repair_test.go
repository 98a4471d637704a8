package session_test

import (
	stdctx "context"
	"fmt"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// numbered gives events their seqs, as a persisted log has them.
func numbered(evs []session.Event) []session.Event {
	for i := range evs {
		evs[i].Seq = int64(i + 1)
	}
	return evs
}

// killedInTool is a log cut while the second of two tool calls ran.
func killedInTool() []session.Event {
	prompt := llm.Message{ID: "m1", Role: llm.RoleUser, Content: "list and count"}
	asst := llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{{ID: "c1", Name: "ls"}, {ID: "c2", Name: "wc"}, {ID: "c3", Name: "du"}}}
	done := llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "a b"}
	return numbered(append(conversation(),
		session.Event{Type: session.TurnStart, Turn: 2},
		session.Event{Type: session.UserMessage, Turn: 2, Message: &prompt},
		session.Event{Type: session.StepStart, Turn: 2, Step: 1},
		session.Event{Type: session.AssistantMessage, Turn: 2, Step: 1, Message: &asst},
		session.Event{Type: session.ToolCall, Turn: 2, Step: 1, ToolCall: &asst.ToolCalls[0]},
		session.Event{Type: session.ToolResult, Turn: 2, Step: 1, Message: &done},
		session.Event{Type: session.ToolCall, Turn: 2, Step: 1, ToolCall: &asst.ToolCalls[1]},
	))
}

// valid checks what every provider requires of a history: each tool call
// of an assistant message answered right after it, no result without its
// call.
func valid(t *testing.T, h llm.History) {
	t.Helper()
	var open []string
	for _, m := range h.All() {
		switch m.Role {
		case llm.RoleTool:
			if len(open) == 0 || open[0] != m.ToolCallID {
				t.Fatalf("result for %q where %v were open", m.ToolCallID, open)
			}
			open = open[1:]
		default:
			if len(open) > 0 {
				t.Fatalf("%s message while calls %v are unanswered", m.Role, open)
			}
			for _, c := range m.ToolCalls {
				open = append(open, c.ID)
			}
		}
	}
	if len(open) > 0 {
		t.Fatalf("history ends with calls %v unanswered", open)
	}
}

func restore(t *testing.T, st *session.Store, id string, evs []session.Event) (*session.Session, error) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	return st.Restore(root, "agent-1", id, evs)
}

func TestRestoreClosesATurnInterruptedInATool(t *testing.T) {
	st := session.NewStore()
	s, err := restore(t, st, "s1", killedInTool())
	if err != nil {
		t.Fatal(err)
	}
	valid(t, s.History())
	evs := s.Events(1)
	tail := evs[len(killedInTool()):]
	var got []string
	for _, e := range tail {
		got = append(got, fmt.Sprintf("%d:%s", e.Seq, e.Type))
		if e.Type == session.ToolResult && (!e.Message.IsError || e.Message.Content != session.InterruptedResult || e.Turn != 2) {
			t.Fatalf("synthetic result %+v", e.Message)
		}
	}
	if fmt.Sprint(got) != "[18:tool/result 19:tool/result 20:turn/end]" {
		t.Fatalf("closing events %v", got)
	}
	if end := tail[2]; end.Reason != session.ReasonInterrupted || end.Turn != 2 {
		t.Fatalf("turn end %+v", end)
	}
	in, ok := s.Interrupted()
	if !ok || in.Turn != 2 || !in.HasPrompt || in.Prompt.Content != "list and count" || in.Unanswered != 2 {
		t.Fatalf("Interrupted() = %+v, %v", in, ok)
	}
	// The closed log replays as it is: no second repair.
	again, err := restore(t, session.NewStore(), "s1", s.Events(1))
	if err != nil {
		t.Fatal(err)
	}
	if again.Len() != s.Len() {
		t.Fatalf("a closed log was repaired again: %d events, want %d", again.Len(), s.Len())
	}
	if _, ok := again.Interrupted(); ok {
		t.Fatal("a closed log reports an interruption")
	}
}

func TestRestoreClosesATurnCutBeforeTheModelAnswered(t *testing.T) {
	evs := numbered(conversation()[:3:3])
	s, err := restore(t, session.NewStore(), "s1", evs)
	if err != nil {
		t.Fatal(err)
	}
	valid(t, s.History())
	last := s.Events(1)[s.Len()-1]
	if last.Type != session.TurnEnd || last.Reason != session.ReasonInterrupted {
		t.Fatalf("last event %+v", last)
	}
	if in, ok := s.Interrupted(); !ok || in.Prompt.Content != "hi" || in.Unanswered != 0 {
		t.Fatalf("Interrupted() = %+v, %v", in, ok)
	}
	// A turn that ended leaves nothing to repair.
	whole, _ := restore(t, session.NewStore(), "s2", numbered(conversation()))
	if whole.Len() != len(conversation()) {
		t.Fatal("a complete log was changed")
	}
	if _, ok := whole.Interrupted(); ok {
		t.Fatal("a complete log reports an interruption")
	}
}

func TestReplayRefusesUnknownTypesAndOrphanResults(t *testing.T) {
	evs := numbered(conversation())
	evs[3].Type = "assistant/thought"
	_, err := session.Replay(evs)
	if !errs.HasCode(err, session.BadLog) || !strings.Contains(err.Error(), `"assistant/thought"`) || !strings.Contains(err.Error(), "event 4") {
		t.Fatalf("unknown type: %v", err)
	}
	evs = numbered(conversation())
	evs[4].Type = "assistant/thought" // the assistant message is lost
	if _, err := restore(t, session.NewStore(), "s1", evs); !errs.HasCode(err, session.BadLog) {
		t.Fatalf("restore with an unknown type: %v", err)
	}
	orphan := numbered(append(conversation()[:4:4], conversation()[6:]...))
	_, err = session.Replay(orphan)
	if !errs.HasCode(err, session.BadLog) || !strings.Contains(err.Error(), `"c1"`) {
		t.Fatalf("orphan result: %v", err)
	}
}

// fakeLocker is a backend whose leases are counted.
type fakeLocker struct {
	held   map[string]bool
	logs   map[string][]session.Event
	locked error
}

type fakeLease struct {
	l  *fakeLocker
	id string
}

func (f fakeLease) Release() error { delete(f.l.held, f.id); return nil }

func (f *fakeLocker) Lock(_ stdctx.Context, id string) (session.Lease, error) {
	if f.locked != nil {
		return nil, f.locked
	}
	if f.held[id] {
		return nil, errs.New(session.SessionLocked, "held").WithReason(session.ReasonOtherProcess)
	}
	f.held[id] = true
	return fakeLease{f, id}, nil
}

func (f *fakeLocker) Load(_ stdctx.Context, id string) ([]session.Event, error) {
	evs, ok := f.logs[id]
	if !ok {
		return nil, errs.New(session.NotFound, "none")
	}
	return evs, nil
}

func TestLeaseIsTakenFirstAndReleasedOnEveryFailure(t *testing.T) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	st := session.NewStore()
	b := &fakeLocker{held: map[string]bool{}, logs: map[string][]session.Event{"bad": {{Seq: 2}}, "cut": killedInTool()}}
	if err := st.SetBackend(root, b); err != nil {
		t.Fatal(err)
	}
	ctx := stdctx.Background()
	for _, id := range []string{"missing", "bad"} {
		if _, err := st.Resume(ctx, root, "a", id); err == nil {
			t.Fatalf("resume of %s worked", id)
		}
		if b.held[id] {
			t.Fatalf("a failed resume of %s kept its lease", id)
		}
	}
	s, err := st.Resume(ctx, root, "a", "cut")
	if err != nil {
		t.Fatal(err)
	}
	if !b.held["cut"] || s.Lease() == nil {
		t.Fatal("resume did not take the lease")
	}
	valid(t, s.History())
	// Another writer holding the session refuses it before anything is read.
	b.held["other"] = true
	b.logs["other"] = killedInTool()
	if _, err := st.Resume(ctx, root, "a", "other"); !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) {
		t.Fatalf("held elsewhere: %v", err)
	}
	if _, err := st.Create(root, "a", "other"); !errs.HasCode(err, session.SessionLocked) {
		t.Fatalf("create of a held session: %v", err)
	}
	st.Close(s)
	if b.held["cut"] {
		t.Fatal("close did not release the lease")
	}
}

// TestAnOldGapInTheMiddleIsAnsweredInTheHistory: a log resumed by an older
// dsh holds an interrupted turn followed by more turns; its unanswered call
// is answered in the derived history, live and on replay alike.
func TestAnOldGapInTheMiddleIsAnsweredInTheHistory(t *testing.T) {
	evs := killedInTool()
	prompt := llm.Message{Role: llm.RoleUser, Content: "again"}
	evs = numbered(append(evs,
		session.Event{Type: session.TurnStart, Turn: 3},
		session.Event{Type: session.UserMessage, Turn: 3, Message: &prompt},
		session.Event{Type: session.TurnEnd, Turn: 3, Reason: "completed"},
	))
	s, err := restore(t, session.NewStore(), "s1", evs)
	if err != nil {
		t.Fatal(err)
	}
	valid(t, s.History())
	replayed, _ := session.Replay(s.Events(1))
	valid(t, replayed)
	if fmt.Sprint(replayed.Messages()) != fmt.Sprint(s.History().Messages()) {
		t.Fatal("replay differs from the live history")
	}
}
