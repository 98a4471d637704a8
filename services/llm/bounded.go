package llm

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// maxNameBytes bounds a tool call's id and name as the bounded stream
// passes them on: a tool name is at most 64 bytes and ids are short, so
// anything longer is garbage, kept only in part.
const maxNameBytes = 256

// bounded enforces Limits on a provider's stream, whatever the provider:
// once a bound is reached it closes the provider's stream, so the rest of
// the response is never read (an HTTP body is abandoned, not drained), and
// it ends the stream with a finish of its own. What the agent loop
// assembles and stores is therefore at most the limits plus one chunk.
type bounded struct {
	s      Stream
	limits Limits
	// text, reasoning: bytes passed on so far.
	text, reasoning int
	// args holds the argument bytes passed on, by call index; its size is
	// the number of calls seen.
	args map[int]int
	// pending are the chunks to hand out before ending: what was cut.
	pending []Chunk
	ended   bool
}

func newBounded(s Stream, l Limits) *bounded {
	return &bounded{s: s, limits: l.WithDefaults()}
}

func (b *bounded) Recv() (Chunk, error) {
	if len(b.pending) > 0 {
		c := b.pending[0]
		b.pending = b.pending[1:]
		return c, nil
	}
	if b.ended {
		return Chunk{}, io.EOF
	}
	c, err := b.s.Recv()
	if err != nil {
		return c, err
	}
	switch c.Kind {
	case ChunkText:
		return b.cap(c, &b.text, b.limits.MaxTextBytes, "max_text_bytes", "answer")
	case ChunkReasoning:
		return b.cap(c, &b.reasoning, b.limits.MaxReasoningBytes, "max_reasoning_bytes", "reasoning")
	case ChunkToolCall:
		if c.ToolCall != nil {
			return b.call(c)
		}
	}
	return c, nil
}

// cap passes a text or reasoning chunk on, cut at the limit; reaching it
// ends the stream as a reply cut at the output limit.
func (b *bounded) cap(c Chunk, n *int, limit int, key, what string) (Chunk, error) {
	if *n+len(c.Text) <= limit {
		*n += len(c.Text)
		return c, nil
	}
	c.Text = cutUTF8(c.Text, limit-*n)
	*n += len(c.Text)
	b.end(Chunk{Kind: ChunkFinish, Finish: FinishMaxTokens, Error: fmt.Sprintf(
		"the %s passed %s (%d bytes); it was cut there and the rest of the response was not read", what, key, limit)})
	if c.Text == "" && c.Signature == "" {
		return b.Recv()
	}
	return c, nil
}

// call passes a tool-call fragment on, unless it starts one call too many
// or takes its call's arguments past the limit: that call is then marked
// refused, with its arguments dropped, and the stream ends.
func (b *bounded) call(c Chunk) (Chunk, error) {
	d := *c.ToolCall
	d.ID, d.Name = cutUTF8(d.ID, maxNameBytes), cutUTF8(d.Name, maxNameBytes)
	c.ToolCall = &d
	if b.args == nil {
		b.args = map[int]int{}
	}
	seen, ok := b.args[d.Index]
	if !ok && len(b.args) >= b.limits.MaxToolCalls {
		d.Arguments = ""
		d.Refused = fmt.Sprintf("not executed: the reply asked for more than %d tool calls in one step (max_tool_calls); this call and any after it were dropped — make at most %d calls per step", b.limits.MaxToolCalls, b.limits.MaxToolCalls)
		b.end(Chunk{Kind: ChunkFinish, Finish: FinishToolCalls})
		return c, nil
	}
	if seen+len(d.Arguments) > b.limits.MaxToolArgumentBytes {
		d.Arguments = ""
		d.Refused = fmt.Sprintf("not executed: the call's arguments passed %d bytes (max_tool_argument_bytes) and were dropped — send smaller arguments, for a large file write it in several parts", b.limits.MaxToolArgumentBytes)
		b.end(Chunk{Kind: ChunkFinish, Finish: FinishToolCalls})
		return c, nil
	}
	b.args[d.Index] = seen + len(d.Arguments)
	return c, nil
}

// end stops reading the provider and queues the finish that ends the
// stream.
func (b *bounded) end(finish Chunk) {
	b.s.Close()
	b.ended = true
	b.pending = append(b.pending, finish)
}

func (b *bounded) Close() error { return b.s.Close() }

// cutUTF8 returns the longest prefix of s of at most n bytes that does not
// split a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 0 {
		return ""
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
