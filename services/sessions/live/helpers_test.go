package live_test

import (
	stdctx "context"
	"fmt"
	"reflect"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/internal/ctxtest"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/hashicorp/go-hclog"
)

// fakeAgent is just enough of an agent for a Hub: an id, a scope and a
// session. The tests drive the session as the loop does.
type fakeAgent struct {
	id    string
	scope *dshctx.Context
	sess  *session.Session
	// pace runs after each chunk of turn, to interleave with clients.
	pace func()
}

func (a *fakeAgent) ID() string                    { return a.id }
func (a *fakeAgent) Status() agents.Status         { return agents.StatusIdle }
func (a *fakeAgent) Session() *session.Session     { return a.sess }
func (a *fakeAgent) Context() *dshctx.Context      { return a.scope }
func (a *fakeAgent) Followup(llm.Message) error    { return nil }
func (a *fakeAgent) Steer(llm.Message) error       { return nil }
func (a *fakeAgent) Abort()                        {}
func (a *fakeAgent) Cancel(error)                  {}
func (a *fakeAgent) WhenIdle(stdctx.Context) error { return nil }
func (a *fakeAgent) Pending() int                  { return 0 }
func (a *fakeAgent) emit(turn, step int, id string, c llm.Chunk) {
	agentloop.EventStreamChunk.Emit(stdctx.Background(), a.scope, agentloop.StreamChunk{Agent: a, Turn: turn, Step: step, MessageID: id, Chunk: c})
}

// append records e and makes it durable, which is when the Hub sends it.
func (a *fakeAgent) append(e session.Event) session.Event {
	e = a.sess.Append(stdctx.Background(), e)
	a.sess.Flush(stdctx.Background())
	return e
}

func newAgent(t testing.TB) *fakeAgent {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	ctxtest.Cleanup(t, root)
	scope, err := root.Scoped("agent-1")
	if err != nil {
		t.Fatal(err)
	}
	s, err := session.NewStore().Create(scope, "agent-1", "s1")
	if err != nil {
		t.Fatal(err)
	}
	return &fakeAgent{id: "agent-1", scope: scope, sess: s}
}

func newHub(t testing.TB, a *fakeAgent, o live.Options) *live.Hub {
	t.Helper()
	h, err := live.New(a, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// turn plays one turn whose answer streams in n text chunks, as the loop
// records it; mid, when set, runs after half the chunks.
func (a *fakeAgent) turn(turn, n int, mid func()) {
	a.append(session.Event{Type: session.TurnStart, Turn: turn})
	a.append(session.Event{Type: session.UserMessage, Turn: turn, Message: &llm.Message{Role: llm.RoleUser, Content: fmt.Sprint("q", turn)}})
	a.append(session.Event{Type: session.StepStart, Turn: turn, Step: 1})
	id := fmt.Sprintf("m%d", turn)
	var asm llm.Assembler
	for i := range n {
		if i == n/2 && mid != nil {
			mid()
		}
		c := llm.Chunk{Kind: llm.ChunkText, Text: fmt.Sprintf("w%d ", i)}
		asm.Add(c)
		a.emit(turn, 1, id, c)
		if a.pace != nil {
			a.pace()
		}
	}
	fin := llm.Chunk{Kind: llm.ChunkFinish, Finish: llm.FinishStop}
	a.emit(turn, 1, id, fin)
	m := asm.Message()
	m.ID = id
	a.append(session.Event{Type: session.AssistantMessage, Turn: turn, Step: 1, Message: &m, Finish: llm.FinishStop})
	a.append(session.Event{Type: session.StepEnd, Turn: turn, Step: 1})
	a.append(session.Event{Type: session.TurnEnd, Turn: turn, Reason: "completed"})
}

// replica is what a client rebuilds from its stream; it fails on a gap or
// a duplicate.
type replica struct {
	events []session.Event
	flight map[string]*msg
	// checked counts streamed messages whose assembly matched the
	// recorded assistant message.
	checked int
}

type msg struct {
	text string
	next int
}

func (r *replica) last() int64 { return int64(len(r.events)) }

func (r *replica) apply(u live.Update) error {
	if r.flight == nil {
		r.flight = map[string]*msg{}
	}
	switch u.Kind {
	case live.KindEvent:
		if u.Seq != r.last()+1 || u.Event.Seq != u.Seq {
			return fmt.Errorf("event seq %d after %d: gap or duplicate", u.Seq, r.last())
		}
		r.events = append(r.events, *u.Event)
		if u.Event.Type == session.AssistantMessage {
			id := u.Event.Message.ID
			if m := r.flight[id]; m != nil {
				if m.text != u.Event.Message.Content {
					return fmt.Errorf("message %s streamed as %q, recorded as %q", id, m.text, u.Event.Message.Content)
				}
				r.checked++
			}
			delete(r.flight, id)
		}
	case live.KindSnapshot:
		s := u.Snapshot
		if m := r.flight[s.MessageID]; m != nil && m.next > s.Next {
			return fmt.Errorf("snapshot of %s covers %d chunks, the client already had %d", s.MessageID, s.Next, m.next)
		}
		r.flight = map[string]*msg{s.MessageID: {text: s.Message.Content, next: s.Next}}
	case live.KindChunk:
		c := u.Chunk
		m := r.flight[c.MessageID]
		if m == nil {
			m = &msg{}
			r.flight[c.MessageID] = m
		}
		if c.Index != m.next {
			return fmt.Errorf("chunk %d of %s, want %d: gap or duplicate", c.Index, c.MessageID, m.next)
		}
		m.next++
		if c.Chunk.Kind == llm.ChunkText {
			m.text += c.Chunk.Text
		}
	}
	return nil
}

// next reads one update with a guard against a hang; the guard is no
// assertion of speed.
func next(t testing.TB, c *live.Client) live.Update {
	t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 20*time.Second)
	defer cancel()
	u, err := c.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return u
}

func sameLog(t testing.TB, got []session.Event, s *session.Session) {
	t.Helper()
	if err := diffLog(got, s); err != nil {
		t.Fatal(err)
	}
}

// diffLog says how a client's events differ from the session's log.
func diffLog(got []session.Event, s *session.Session) error {
	want := s.Events(1)
	if len(got) != len(want) {
		return fmt.Errorf("client holds %d events, the log %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			return fmt.Errorf("event %d differs:\n got %+v\nwant %+v", i+1, got[i], want[i])
		}
	}
	return nil
}
