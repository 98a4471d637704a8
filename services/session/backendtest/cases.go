package backendtest

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

var bg = stdctx.Background()

// turn appends one whole turn of prompt and answer.
func turn(s *session.Session, n int, prompt, answer string) {
	s.Append(bg, session.Event{Type: session.TurnStart, Turn: n})
	s.Append(bg, session.Event{Type: session.UserMessage, Turn: n, Message: &llm.Message{Role: llm.RoleUser, Content: prompt}, RequestID: "req-" + prompt})
	s.Append(bg, session.Event{Type: session.AssistantMessage, Turn: n, Message: &llm.Message{Role: llm.RoleAssistant, Content: answer}, Finish: llm.FinishStop})
	s.Append(bg, session.Event{Type: session.TurnEnd, Turn: n, Reason: "completed"})
}

func flush(t *testing.T, s *session.Session) {
	t.Helper()
	if err := s.Flush(bg); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// sameLog fails unless got holds the events of want, field for field as
// they travel through JSON.
func sameLog(t *testing.T, got, want []session.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("loaded %d events, %d were written", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.Type != w.Type || g.Turn != w.Turn || !g.Time.Equal(w.Time) || g.Reason != w.Reason || g.RequestID != w.RequestID {
			t.Fatalf("event %d: loaded %+v, wrote %+v", i+1, g, w)
		}
		if (g.Message == nil) != (w.Message == nil) || (g.Message != nil && (g.Message.Content != w.Message.Content || g.Message.Role != w.Message.Role)) {
			t.Fatalf("event %d: loaded message %+v, wrote %+v", i+1, g.Message, w.Message)
		}
	}
}

func appendLoadRoundTrip(t *testing.T, f Fixture) {
	a := f.mount(t)
	s := a.open(t, "agent", "s1")
	turn(s, 1, "first", "one")
	flush(t, s)
	turn(s, 2, "second", "two")
	flush(t, s)
	written := s.Events(1)
	a.close(t)
	b := f.mount(t)
	sameLog(t, b.load(t, "s1"), written)
	if _, err := session.Replay(b.load(t, "s1")); err != nil {
		t.Fatalf("the loaded log does not replay: %v", err)
	}
}

func flushMakesEventsVisible(t *testing.T, f Fixture) {
	a, b := f.mount(t), f.mount(t)
	s := a.open(t, "agent", "s1")
	turn(s, 1, "first", "one")
	flush(t, s)
	// What a flush returned for is readable by another process at once,
	// while the writer still holds the session.
	sameLog(t, b.load(t, "s1"), s.Events(1))
	turn(s, 2, "second", "two")
	flush(t, s)
	sameLog(t, b.load(t, "s1"), s.Events(1))
}

func disposeWritesPending(t *testing.T, f Fixture) {
	a := f.mount(t)
	s := a.open(t, "agent", "s1")
	turn(s, 1, "first", "one")
	written := s.Events(1) // never flushed: the dispose writes it
	a.close(t)
	sameLog(t, f.mount(t).load(t, "s1"), written)
}

func agentResumes(t *testing.T, f Fixture) {
	a := f.mount(t, scripted.Reply{Text: "hello back"})
	h, err := a.registry.Create(bg, agents.CreateOptions{AgentID: "main", SessionID: "s1", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	h.Agent.Followup(llm.Message{Content: "hello"})
	h.Agent.WhenIdle(bg)
	if err := h.Dispose(bg); err != nil {
		t.Fatal(err)
	}
	a.close(t)

	b := f.mount(t, scripted.Reply{Text: "again"})
	h, err = b.registry.Resume(bg, agents.ResumeOptions{AgentID: "main", ResumeSessionID: "s1", Options: agents.Options{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Dispose(bg)
	var got []string
	for _, m := range h.Agent.Session().History().Messages() {
		got = append(got, string(m.Role)+":"+m.Content)
	}
	if strings.Join(got, ",") != "user:hello,assistant:hello back" {
		t.Fatalf("the resumed history is %v", got)
	}
	if _, ok := h.Agent.Session().Interrupted(); ok {
		t.Fatal("a session whose turn ended resumed as interrupted")
	}
	if id, ok := h.Agent.Session().Request("missing"); ok {
		t.Fatalf("unknown request id found: %s", id)
	}
}

func resumeRepairs(t *testing.T, f Fixture) {
	a := f.mount(t)
	s := a.open(t, "agent", "s1")
	turn(s, 1, "first", "one")
	s.Append(bg, session.Event{Type: session.TurnStart, Turn: 2})
	s.Append(bg, session.Event{Type: session.UserMessage, Turn: 2, Message: &llm.Message{Role: llm.RoleUser, Content: "use the tool"}})
	call := llm.ToolCall{ID: "c1", Name: "echo"}
	s.Append(bg, session.Event{Type: session.AssistantMessage, Turn: 2, Message: &llm.Message{Role: llm.RoleAssistant, ToolCalls: []llm.ToolCall{call}}})
	s.Append(bg, session.Event{Type: session.ToolCall, Turn: 2, ToolCall: &call})
	flush(t, s)
	cut := s.Len()
	// The process dies inside the tool call: its lease goes without the
	// turn's end being written.
	a.store.Close(s)
	a.close(t)

	b := f.mount(t)
	scope, _ := b.root.Scoped("agent")
	r, err := b.store.Resume(bg, scope, "agent", "s1")
	if err != nil {
		t.Fatal(err)
	}
	in, ok := r.Interrupted()
	if !ok || in.Turn != 2 || in.Prompt.Content != "use the tool" || in.Unanswered != 1 {
		t.Fatalf("Interrupted() = %+v, %v", in, ok)
	}
	// Stored by the resume itself, before any checkpoint: a reader
	// elsewhere sees the turn closed while the session stays open.
	if got := f.mount(t).load(t, "s1"); len(got) != r.Len() || got[len(got)-1].Type != session.TurnEnd {
		t.Fatalf("while the resumed session is open the store holds %d events (of %d), ending with %+v", len(got), r.Len(), got[len(got)-1])
	}
	flush(t, r)
	b.store.Close(r)
	b.close(t)

	events := f.mount(t).load(t, "s1")
	if len(events) <= cut {
		t.Fatalf("the closing events were not stored: %d events, %d before the resume", len(events), cut)
	}
	last := events[len(events)-1]
	if last.Type != session.TurnEnd || last.Turn != 2 {
		t.Fatalf("the stored log ends with %+v, not the interrupted turn's end", last)
	}
	if _, err := session.Replay(events); err != nil {
		t.Fatalf("the repaired log does not replay: %v", err)
	}
}

func secondWriterRefused(t *testing.T, f Fixture) {
	a, b := f.mount(t), f.mount(t)
	s := a.open(t, "agent", "s1")
	turn(s, 1, "first", "one")
	flush(t, s)
	scope, _ := b.root.Scoped("other")
	if _, err := b.store.Create(scope, "other", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) {
		t.Fatalf("a held session opened in another process: %v", err)
	}
	if _, err := b.store.Resume(bg, scope, "other", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) {
		t.Fatalf("a held session resumed in another process: %v", err)
	}
	if err := a.store.Close(s); err != nil {
		t.Fatal(err)
	}
	r, err := b.store.Resume(bg, scope, "other", "s1")
	if err != nil {
		t.Fatalf("a released session cannot be resumed: %v", err)
	}
	b.store.Close(r)
}

func releasedWriterFenced(t *testing.T, f Fixture) {
	a, b := f.mount(t), f.mount(t)
	old := a.open(t, "old", "s1")
	turn(old, 1, "first", "one")
	flush(t, old)
	a.store.Close(old)
	scope, _ := b.root.Scoped("new")
	cur, err := b.store.Resume(bg, scope, "new", "s1")
	if err != nil {
		t.Fatal(err)
	}
	// The old owner's late events are refused and never reach the log.
	turn(old, 9, "late", "stale")
	if err := old.Flush(bg); !errs.Has(err, session.SessionLocked, session.ReasonFenced) {
		t.Fatalf("a released writer's flush: %v", err)
	}
	turn(cur, 2, "second", "two")
	flush(t, cur)
	want := cur.Events(1)
	b.store.Close(cur)
	got := f.mount(t).load(t, "s1")
	sameLog(t, got, want)
}

func loadMissing(t *testing.T, f Fixture) {
	if _, err := f.mount(t).store.Load(bg, "nobody"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("loading a missing session: %v", err)
	}
}

func listSessions(t *testing.T, f Fixture) {
	a, b := f.mount(t), f.mount(t)
	s := a.open(t, "agent", "done")
	turn(s, 1, "the   first\nprompt", "one")
	flush(t, s)
	a.store.Close(s)
	open := a.open(t, "agent", "busy")
	open.Append(bg, session.Event{Type: session.TurnStart, Turn: 1})
	flush(t, open)
	list, err := b.store.List(bg)
	if errs.HasCode(err, session.Unsupported) {
		t.Logf("the backend cannot list: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]session.Summary{}
	for _, x := range list {
		byID[x.ID] = x
	}
	done, ok := byID["done"]
	if !ok || done.Agent != "agent" || done.Title != "the first prompt" || done.Turns != 1 || done.State != session.StateIdle || done.Created.IsZero() || done.Size == 0 {
		t.Fatalf("the listing of an ended session: %+v", done)
	}
	if busy := byID["busy"]; busy.State != session.StateOpen || busy.Holder == "" {
		t.Fatalf("the listing of a session held by another process: %+v", busy)
	}
	if len(list) != 2 {
		t.Fatalf("listed %d sessions: %+v", len(list), list)
	}
}

func deleteSessions(t *testing.T, f Fixture) {
	a, b := f.mount(t), f.mount(t)
	s := a.open(t, "agent", "s1")
	turn(s, 1, "first", "one")
	flush(t, s)
	err := b.store.Delete(bg, "s1")
	if errs.HasCode(err, session.Unsupported) {
		t.Logf("the backend cannot delete: %v", err)
		return
	}
	if !errs.Has(err, session.SessionLocked, session.ReasonOtherProcess) {
		t.Fatalf("deleting a session another process holds: %v", err)
	}
	if len(b.load(t, "s1")) != 4 {
		t.Fatal("a refused delete removed events")
	}
	a.store.Close(s)
	if err := b.store.Delete(bg, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Load(bg, "s1"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("a deleted session loads: %v", err)
	}
	if err := b.store.Delete(bg, "s1"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
	// The id is free again: a new session under it starts empty.
	n := b.open(t, "agent", "s1")
	turn(n, 1, "fresh", "new")
	flush(t, n)
	if got := b.load(t, "s1"); len(got) != 4 || got[1].Message.Content != "fresh" {
		t.Fatalf("a session made after the delete loads %+v", got)
	}
}
