package acp

import (
	stdctx "context"

	"github.com/coder/acp-go-sdk"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
)

// pump turns the session's live updates into session/update
// notifications until the session closes. The stream attaches itself
// again when it falls behind (a client that reads slowly), the hub's
// backlog and snapshot filling the gap.
func (st *conv) pump() {
	defer func() {
		st.mu.Lock()
		for _, cancel := range st.questions {
			cancel()
		}
		st.mu.Unlock()
		close(st.pumpDone)
	}()
	var held *live.Update
	reattaches := 0
	for {
		var u live.Update
		var err error
		if held != nil {
			u, held = *held, nil
		} else {
			u, err = st.stream.Next(st.ctx)
		}
		if err != nil {
			if st.ctx.Err() == nil && !errs.HasCode(err, live.HubClosed) && !errs.HasCode(err, live.Detached) {
				st.srv.log.Warn("the session's stream was lost", "session", st.id, "error", err)
			}
			return
		}
		if n := st.stream.Reattaches(); n != reattaches {
			reattaches = n
			// The hub asks the new attachment the open questions again;
			// the editor must not see each twice.
			st.mu.Lock()
			for _, cancel := range st.questions {
				cancel()
			}
			st.mu.Unlock()
		}
		if u.Kind == live.KindChunk {
			held = coalesce(st.stream, &u)
		}
		st.handle(u)
	}
}

// maxCoalesce bounds the text one update carries.
const maxCoalesce = 64 << 10

// polled is an ended ctx: Next with it returns what is queued, at once.
var polled = func() stdctx.Context {
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	cancel()
	return ctx
}()

// coalesce appends to u the text of the chunks of the same message and
// kind already queued behind it, so a client slower than the model gets
// fewer, larger updates instead of falling behind; it returns the first
// update that did not fit, to be handled next. The first chunk of a burst
// goes out alone when nothing is queued behind it: coalescing never waits.
func coalesce(stream sessions.Stream, u *live.Update) *live.Update {
	c := &u.Chunk.Chunk
	if c.Kind != llm.ChunkText && c.Kind != llm.ChunkReasoning {
		return nil
	}
	var b []byte
	for len(c.Text)+len(b) < maxCoalesce {
		next, err := stream.Next(polled)
		if err != nil {
			break
		}
		if next.Kind != live.KindChunk || next.Chunk.MessageID != u.Chunk.MessageID || next.Chunk.Chunk.Kind != c.Kind {
			if b != nil {
				c.Text += string(b)
			}
			return &next
		}
		if b == nil {
			b = append(make([]byte, 0, 256), c.Text...)
			c.Text = ""
		}
		b = append(b, next.Chunk.Chunk.Text...)
	}
	if b != nil {
		c.Text += string(b)
	}
	return nil
}

func (st *conv) handle(u live.Update) {
	switch u.Kind {
	case live.KindChunk:
		st.chunk(u.Chunk.MessageID, u.Chunk.Chunk)
	case live.KindSnapshot:
		// A (re-)attach in the middle of a message: send what of it the
		// client has not had yet.
		st.rest(u.Snapshot.MessageID, u.Snapshot.Message, false)
	case live.KindEvent:
		st.event(u.Seq, u.Event)
	case live.KindQuestion:
		st.ask(u.Question)
	case live.KindToolStart:
		st.toolStart(u.ToolStart.CallID)
	case live.KindSettled:
		st.mu.Lock()
		if cancel, ok := st.questions[u.Settled.QuestionID]; ok {
			cancel()
		}
		st.mu.Unlock()
	case live.KindNotice:
		// Refusals reach the prompt that caused them as its error.
	}
}

// sent counts what of a message's text and reasoning went out as chunks.
type sent struct{ text, thought int }

// rest sends what of m the client lacks; done forgets the message.
func (st *conv) rest(id string, m llm.Message, done bool) {
	st.mu.Lock()
	had := st.streamed[id]
	if done {
		delete(st.streamed, id)
	} else {
		st.streamed[id] = sent{len(m.Content), len(m.Reasoning)}
	}
	st.mu.Unlock()
	if len(m.Reasoning) > had.thought {
		st.sendText(kindThought, m.Reasoning[had.thought:])
	}
	if len(m.Content) > had.text {
		st.sendText(kindMessage, m.Content[had.text:])
	}
}

func (st *conv) chunk(messageID string, c llm.Chunk) {
	switch c.Kind {
	case llm.ChunkText:
		st.mu.Lock()
		n := st.streamed[messageID]
		n.text += len(c.Text)
		st.streamed[messageID] = n
		st.mu.Unlock()
		st.sendText(kindMessage, c.Text)
	case llm.ChunkReasoning:
		st.mu.Lock()
		n := st.streamed[messageID]
		n.thought += len(c.Text)
		st.streamed[messageID] = n
		st.mu.Unlock()
		st.sendText(kindThought, c.Text)
	case llm.ChunkUsage:
		if c.Usage != nil {
			// dsh does not know the model's context window: size is what
			// this call used, so a client shows the use, not a ratio.
			used := c.Usage.InputTokens + c.Usage.OutputTokens
			st.send(acp.SessionUpdate{UsageUpdate: &acp.SessionUsageUpdate{SessionUpdate: "usage_update", Used: used, Size: used}})
		}
	}
}

// event sends what a durable event shows the person.
func (st *conv) event(seq int64, e *session.Event) {
	st.mu.Lock()
	history := seq <= st.replayTo
	st.mu.Unlock()
	switch e.Type {
	case session.UserMessage, session.SteeringMessage:
		if e.Message != nil {
			if history {
				st.send(acp.UpdateUserMessageText(e.Message.Content))
			}
			st.title(e.Message.Content)
		}
	case session.AssistantMessage:
		if e.Message != nil {
			st.rest(e.Message.ID, *e.Message, true)
		}
	case session.ToolCall:
		if e.ToolCall != nil {
			st.toolCall(*e.ToolCall)
		}
	case session.ToolResult:
		if e.Message != nil {
			st.toolResult(*e.Message)
		}
	case session.PlanUpdated:
		if e.Plan != nil {
			st.planUpdated(*e.Plan, history)
		}
	case session.TurnEnd:
		if !history {
			st.send(acp.SessionUpdate{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{SessionUpdate: "session_info_update",
				UpdatedAt: acp.Ptr(e.Time.UTC().Format("2006-01-02T15:04:05Z07:00"))}})
		}
	}
	st.mu.Lock()
	if seq > st.forwarded {
		st.forwarded = seq
	}
	st.notifyLocked()
	st.mu.Unlock()
}

// title sends the session's title once, from its first prompt.
func (st *conv) title(prompt string) {
	st.mu.Lock()
	done := st.titled
	st.titled = true
	st.mu.Unlock()
	if !done {
		st.send(acp.SessionUpdate{SessionInfoUpdate: &acp.SessionSessionInfoUpdate{SessionUpdate: "session_info_update", Title: acp.Ptr(session.Title(prompt))}})
	}
}
