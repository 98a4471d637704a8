package session_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
)

// TestACompactedEventReplacesTheOlderHistory: the history becomes the
// summary and the kept messages, live and on replay, and grows on from
// there.
func TestACompactedEventReplacesTheOlderHistory(t *testing.T) {
	_, _, s := newSession(t)
	ctx := stdctx.Background()
	for _, e := range conversation() {
		s.Append(ctx, e)
	}
	n := s.History().Len()
	last, _ := s.History().Last()
	summary := llm.Message{Role: llm.RoleUser, Content: "summary"}
	s.Append(ctx, session.Event{Type: session.Compacted, Message: &summary, Compaction: &session.Compaction{Summarized: n - 1, Kept: 1}})
	next := llm.Message{Role: llm.RoleUser, Content: "next"}
	s.Append(ctx, session.Event{Type: session.TurnStart, Turn: 2})
	s.Append(ctx, session.Event{Type: session.UserMessage, Turn: 2, Message: &next})

	want := []string{"summary", last.Content, "next"}
	for name, h := range map[string]llm.History{"live": s.History(), "replay": must(session.Replay(s.Events(1)))} {
		got := h.Messages()
		if len(got) != len(want) {
			t.Fatalf("%s: %d messages, want %v", name, len(got), want)
		}
		for i := range want {
			if got[i].Content != want[i] {
				t.Fatalf("%s: message %d is %q, want %q", name, i, got[i].Content, want[i])
			}
		}
	}
}

func TestCompactionSaysWhatItDid(t *testing.T) {
	c := session.Compaction{Turns: 43, Summarized: 120, Kept: 6, SummaryTokens: 1234}
	if got, want := c.String(), "compacted 43 turns (120 messages) into 1.2k tokens; 6 recent messages kept"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if !session.Compacted.Known() {
		t.Fatal("history/compacted is not a known event type: logs with it would not load")
	}
}

func must(h llm.History, err error) llm.History {
	if err != nil {
		panic(err)
	}
	return h
}
