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
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newSession(t *testing.T) (*dshctx.Context, *session.Store, *session.Session) {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	scope, _ := root.Scoped("agent-1")
	st := session.NewStore()
	s, err := st.Create(scope, "agent-1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	return root, st, s
}

func conversation() []session.Event {
	user := llm.Message{Role: llm.RoleUser, Content: "hi"}
	asst := llm.Message{Role: llm.RoleAssistant, Content: "calling", ToolCalls: []llm.ToolCall{{ID: "c1", Name: "clock"}}}
	tool := llm.Message{Role: llm.RoleTool, ToolCallID: "c1", Content: "noon"}
	steer := llm.Message{Role: llm.RoleUser, Content: "faster"}
	return []session.Event{
		{Type: session.TurnStart, Turn: 1},
		{Type: session.UserMessage, Turn: 1, Message: &user},
		{Type: session.StepStart, Turn: 1, Step: 1},
		{Type: session.AssistantChunk, Turn: 1, Step: 1, Chunk: &llm.Chunk{Kind: llm.ChunkText, Text: "calling"}},
		{Type: session.AssistantMessage, Turn: 1, Step: 1, Message: &asst, Usage: &llm.Usage{InputTokens: 3}},
		{Type: session.ToolCall, Turn: 1, Step: 1, ToolCall: &asst.ToolCalls[0]},
		{Type: session.ToolResult, Turn: 1, Step: 1, Message: &tool},
		{Type: session.SteeringMessage, Turn: 1, Step: 1, Message: &steer},
		{Type: session.StepEnd, Turn: 1, Step: 1},
		{Type: session.TurnEnd, Turn: 1, Reason: "completed"},
	}
}

func TestAppendNumbersContiguouslyAndDerivesHistory(t *testing.T) {
	_, _, s := newSession(t)
	for _, e := range conversation() {
		s.Append(stdctx.Background(), e)
	}
	evs := s.Events(1)
	for i, e := range evs {
		if e.Seq != int64(i+1) || e.Time.IsZero() {
			t.Fatalf("event %d has seq %d time %v", i, e.Seq, e.Time)
		}
	}
	var got []string
	for _, m := range s.History().All() {
		got = append(got, string(m.Role)+":"+m.Content)
	}
	if fmt.Sprint(got) != "[user:hi assistant:calling tool:noon user:faster]" {
		t.Fatalf("history %v", got)
	}
	if tail := s.Events(9); len(tail) != 2 || tail[0].Type != session.StepEnd {
		t.Fatalf("Events(9) = %v", tail)
	}
}

func TestEventsCannotChangeOnceAppended(t *testing.T) {
	_, _, s := newSession(t)
	for _, e := range conversation() {
		s.Append(stdctx.Background(), e)
	}
	evs := s.Events(1)
	evs[1].Message.Content = "rewritten"
	evs[4].Message.ToolCalls[0].Name = "rm"
	evs[3].Chunk.Text = "x"
	again := s.Events(1)
	if again[1].Message.Content != "hi" || again[4].Message.ToolCalls[0].Name != "clock" || again[3].Chunk.Text != "calling" {
		t.Fatal("a returned event changed the log")
	}
	h := s.History()
	m := h.At(1)
	m.ToolCalls[0].Name = "rm"
	if s.History().At(1).ToolCalls[0].Name != "clock" {
		t.Fatal("a history copy changed the log")
	}
}

func TestReplayGivesTheIdenticalHistory(t *testing.T) {
	_, st, s := newSession(t)
	for _, e := range conversation() {
		s.Append(stdctx.Background(), e)
	}
	replayed, err := session.Replay(s.Events(1))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%+v", replayed.Messages()) != fmt.Sprintf("%+v", s.History().Messages()) {
		t.Fatal("replay differs from the live history")
	}
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	defer root.Dispose(stdctx.Background())
	restored, err := st.Restore(root, "agent-1", "s2", s.Events(1))
	if err != nil {
		t.Fatal(err)
	}
	if restored.Len() != s.Len() || fmt.Sprintf("%+v", restored.History().Messages()) != fmt.Sprintf("%+v", s.History().Messages()) {
		t.Fatal("restore differs")
	}
	bad := s.Events(1)
	bad[3].Seq = 9
	if _, err := session.Replay(bad); !errs.HasCode(err, session.BadLog) {
		t.Fatalf("gap in log: %v", err)
	}
	if _, err := st.Restore(root, "agent-1", "s3", bad); !errs.HasCode(err, session.BadLog) {
		t.Fatalf("restore of a bad log: %v", err)
	}
}

func TestStoreRules(t *testing.T) {
	root, st, _ := newSession(t)
	if _, err := st.Create(root, "agent-1", "s1"); !errs.HasCode(err, session.SessionExists) {
		t.Fatalf("duplicate session: %v", err)
	}
	if _, err := st.Create(root, "x", ""); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("empty id: %v", err)
	}
	s, _ := st.Get("s1")
	st.Closing(s)
	if _, err := st.Create(root, "agent-2", "s1"); !errs.Has(err, session.SessionLocked, session.ReasonClosing) || !strings.Contains(err.Error(), `"agent-1"`) {
		t.Fatalf("a closing session's id: %v", err)
	}
	st.Close(s)
	if _, ok := st.Get("s1"); ok {
		t.Fatal("closed session still there")
	}
	if _, err := st.Load(stdctx.Background(), "s1"); !errs.HasCode(err, session.NoPersistence) {
		t.Fatalf("load without backend: %v", err)
	}
}

func TestAppendEmitsInTheAgentScope(t *testing.T) {
	root, _, s := newSession(t)
	other, _ := root.Scoped("agent-2")
	var mine, theirs int
	scope, _ := root.Scoped("agent-1")
	session.EventAppended.On(scope, func(stdctx.Context, session.Appended) error { mine++; return nil })
	session.EventAppended.On(other, func(stdctx.Context, session.Appended) error { theirs++; return nil })
	s.Append(stdctx.Background(), session.Event{Type: session.TurnStart, Turn: 1})
	if mine != 1 || theirs != 0 {
		t.Fatalf("mine %d theirs %d", mine, theirs)
	}
}
