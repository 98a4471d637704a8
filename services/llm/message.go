// Package llm is the model service: the message and stream-chunk vocabulary
// every provider speaks, the registry of provider adapters, and a helper
// that assembles a stream into an assistant message.
//
// A provider turns a Request into a Stream of Chunks: text and reasoning
// deltas, tool-call fragments joined by index, usage, and one finish. The
// agent loop records each chunk in the session as it arrives and assembles
// the step's message with an Assembler.
package llm

import "slices"

// Role says who a message comes from.
type Role string

// Message roles.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one entry of a conversation. Assistant messages carry the
// reasoning that came with them, because some APIs (DeepSeek) require it to
// be sent back with the tool calls it led to.
type Message struct {
	ID      string `json:"id,omitempty"`
	Role    Role   `json:"role"`
	Content string `json:"content,omitempty"`
	// Reasoning is the model's thinking for an assistant message.
	Reasoning string `json:"reasoning,omitempty"`
	// ReasoningSignature authenticates Reasoning for APIs that sign it
	// (Anthropic).
	ReasoningSignature string `json:"reasoning_signature,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID links a tool message to the call it answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	// IsError marks a tool message that reports a failure.
	IsError bool `json:"is_error,omitempty"`
}

// Clone returns a copy that shares nothing mutable with m.
func (m Message) Clone() Message {
	m.ToolCalls = slices.Clone(m.ToolCalls)
	return m
}

// ToolCall is one call of a tool by the model. Arguments is the JSON text
// the model produced, kept as received.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// Usage counts the tokens of one model call.
type Usage struct {
	InputTokens     int `json:"input_tokens,omitempty"`
	OutputTokens    int `json:"output_tokens,omitempty"`
	ReasoningTokens int `json:"reasoning_tokens,omitempty"`
	// CacheHitTokens and CacheMissTokens split InputTokens by whether the
	// provider served them from its prompt cache.
	CacheHitTokens  int `json:"cache_hit_tokens,omitempty"`
	CacheMissTokens int `json:"cache_miss_tokens,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{
		InputTokens:     u.InputTokens + o.InputTokens,
		OutputTokens:    u.OutputTokens + o.OutputTokens,
		ReasoningTokens: u.ReasoningTokens + o.ReasoningTokens,
		CacheHitTokens:  u.CacheHitTokens + o.CacheHitTokens,
		CacheMissTokens: u.CacheMissTokens + o.CacheMissTokens,
	}
}

// History is a read-only view of a conversation: a prefix of an append-only
// list. Appending to a History returns a new one and never changes what
// another view sees, so the agent loop hands the same history to every
// listener without copying it.
type History struct {
	msgs []Message
}

// NewHistory returns a history holding copies of msgs.
func NewHistory(msgs ...Message) History {
	h := History{msgs: make([]Message, len(msgs))}
	for i, m := range msgs {
		h.msgs[i] = m.Clone()
	}
	return h
}

// Len returns the number of messages.
func (h History) Len() int { return len(h.msgs) }

// At returns a copy of message i.
func (h History) At(i int) Message { return h.msgs[i].Clone() }

// Last returns a copy of the last message and whether there is one.
func (h History) Last() (Message, bool) {
	if len(h.msgs) == 0 {
		return Message{}, false
	}
	return h.At(len(h.msgs) - 1), true
}

// All iterates over copies of the messages in order.
func (h History) All() func(yield func(int, Message) bool) {
	return func(yield func(int, Message) bool) {
		for i := range h.msgs {
			if !yield(i, h.msgs[i].Clone()) {
				return
			}
		}
	}
}

// Messages returns copies of all messages.
func (h History) Messages() []Message {
	out := make([]Message, len(h.msgs))
	for i := range h.msgs {
		out[i] = h.msgs[i].Clone()
	}
	return out
}

// Append returns a history with msgs added. The receiver is unchanged.
func (h History) Append(msgs ...Message) History {
	// Cap the receiver so append never writes into an array another view
	// may see beyond its length.
	out := h.msgs[:len(h.msgs):len(h.msgs)]
	for _, m := range msgs {
		out = append(out, m.Clone())
	}
	return History{msgs: out}
}

// Slice returns the messages [from, to) as a history, for plugins that
// compact a conversation.
func (h History) Slice(from, to int) History {
	return History{msgs: h.msgs[from:to:to]}
}

// Log is the append-only list behind Histories. Its owner appends; every
// View stays valid and unchanged while it does, because a view never sees
// past its own length and a view's Append copies. A Log is not safe for
// concurrent appends; guard it with the owner's lock.
type Log struct{ msgs []Message }

// Append adds a copy of m.
func (l *Log) Append(m Message) { l.msgs = append(l.msgs, m.Clone()) }

// Len returns the number of messages.
func (l *Log) Len() int { return len(l.msgs) }

// View returns the current content as a read-only History, without copying.
func (l *Log) View() History {
	return History{msgs: l.msgs[:len(l.msgs):len(l.msgs)]}
}
