// Package llm is the model service: the message and stream-chunk vocabulary
// every provider speaks, the registry of provider adapters, and a helper
// that assembles a stream into an assistant message.
//
// A provider turns a Request into a Stream of Chunks: text and reasoning
// deltas, tool-call fragments joined by index, usage, and one finish. The
// agent loop hands each chunk to live listeners as it arrives, assembles the
// step's message with an Assembler and records only that message.
package llm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/bits"
	"slices"
)

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
	// Parts is the content of a multimodal message, in order; nil for a
	// text-only one (see Part).
	Parts []Part `json:"parts,omitempty"`
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
	// RequestID is the sender's id for a message delivered from outside,
	// so a retried delivery is recognized. Providers do not send it.
	RequestID string `json:"request_id,omitempty"`
	// Unattended marks a message from a source no person watches (a
	// webhook, a schedule, another agent): a turn it starts never waits
	// for a person, so the approval stage refuses what it would ask.
	// Providers do not send it.
	Unattended bool `json:"unattended,omitempty"`
	// From is who is behind a message delivered from outside, as its
	// entry point established it: the agent loop hands it to the approval
	// stage with every call of the turn, and the log keeps it so an audit
	// or a replay knows who asked. Providers do not send it.
	From *Provenance `json:"from,omitempty"`
	// Sent is a digest of the text its sender sent (SentDigest), kept
	// when a listener rewrote it (a command's expansion): a retry under
	// RequestID sends that text again, not the rewritten one, and is
	// told apart from other text by it. Empty when the content is the
	// sender's. Providers do not send it.
	Sent string `json:"sent,omitempty"`
}

// SentDigest is the digest Message.Sent keeps of a sender's text: enough
// to tell a retry from other text, without keeping the text twice.
func SentDigest(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:16])
}

// Provenance says who is behind an input: the principal that sent it,
// the entry point it came through, and on whose behalf, when the sender
// is a delegate (a subagent's parent's person). It lives here, beside the
// message that carries it, so the agent loop and the tools service can
// hand it on without importing the agent controller; the controller's
// Source and Principal are the same types.
type Provenance struct {
	Principal  Principal  `json:"principal,omitzero"`
	Entry      string     `json:"entry,omitempty"`
	OnBehalfOf *Principal `json:"on_behalf_of,omitempty"`
}

// IsZero reports whether nothing is known about the input's sender.
func (p Provenance) IsZero() bool {
	return p.Principal.IsZero() && p.Entry == "" && p.OnBehalfOf == nil
}

// Principal identifies a sender. Kind says how the identity was
// established, ID names it within that kind, and Tenant groups principals
// that share quotas and policies.
type Principal struct {
	// Kind is one of "token" (a named serve token), "jwt" (a verified
	// bearer token's subject), "user" (the OS user of the CLI), "editor"
	// (an ACP client), "webhook", "schedule", "agent" (a parent agent);
	// empty when the entry point established none.
	Kind string `json:"kind,omitempty"`
	// ID names the principal within its kind: the token's name, the JWT's
	// mapped subject, the user name, the webhook's or schedule's name, the
	// parent session id.
	ID string `json:"id,omitempty"`
	// Tenant is the group the principal belongs to, when one is known.
	Tenant string `json:"tenant,omitempty"`
}

// IsZero reports whether no principal was established.
func (p Principal) IsZero() bool { return p == Principal{} }

// String is kind:id, or "anonymous".
func (p Principal) String() string {
	if p.Kind == "" && p.ID == "" {
		return "anonymous"
	}
	return p.Kind + ":" + p.ID
}

// Clone returns a copy that shares nothing mutable with m.
func (m Message) Clone() Message {
	m.ToolCalls = slices.Clone(m.ToolCalls)
	m.Parts = cloneParts(m.Parts)
	return m
}

// ToolCall is one call of a tool by the model. Arguments is the JSON text
// the model produced, kept as received.
type ToolCall struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	// Refused says why the call does not run although the model asked for
	// it (a bound of Limits); the agent loop answers it with this text.
	Refused string `json:"refused,omitempty"`
}

// Usage counts the tokens of one model call.
type Usage struct {
	InputTokens     int `json:"input_tokens,omitempty" koanf:"input_tokens"`
	OutputTokens    int `json:"output_tokens,omitempty" koanf:"output_tokens"`
	ReasoningTokens int `json:"reasoning_tokens,omitempty" koanf:"reasoning_tokens"`
	// CacheHitTokens and CacheMissTokens split InputTokens by whether the
	// provider served them from its prompt cache.
	CacheHitTokens  int `json:"cache_hit_tokens,omitempty" koanf:"cache_hit_tokens"`
	CacheMissTokens int `json:"cache_miss_tokens,omitempty" koanf:"cache_miss_tokens"`
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

// History is a read-only view of a conversation: a window on an
// append-only list kept in fixed-size pages. Appending to a History returns
// a new one and never changes what another view sees, so the agent loop
// hands the same history to every listener without copying it, and a
// listener may read it on any goroutine while the log goes on appending.
type History struct {
	pages [][]Message
	off   int // index of the first message in pages
	n     int
}

// Pages grow from firstPage messages to pageSize and stay there: a short
// conversation — most of them, and every fresh agent's — does not pay for
// a full page up front, and a long one still never copies what it holds.
//
// A page is made at its full length and never resliced, so the log fills
// it in place: a view holds the page's header, which never changes, and
// reads only slots below its own length, which are never written again.
const (
	firstPage = 8
	pageSize  = 128
	// doubling is how many messages the pages before the first full one
	// hold: 8 + 16 + 32 + 64.
	doubling = firstPage * (pageSize/firstPage - 1)
)

// locate returns the page and the slot of message j.
func locate(j int) (page, slot int) {
	if j < doubling {
		page = bits.Len(uint(j/firstPage+1)) - 1
		return page, j - firstPage*(1<<page-1)
	}
	j -= doubling
	return fullPages + j/pageSize, j % pageSize
}

// fullPages is the index of the first page of pageSize messages.
var fullPages = bits.Len(uint(pageSize/firstPage)) - 1

// pageLen is the length of page k. (Shifting firstPage by k would
// overflow for the pages of a long conversation.)
func pageLen(k int) int {
	if k >= fullPages {
		return pageSize
	}
	return firstPage << k
}

// NewHistory returns a history holding copies of msgs.
func NewHistory(msgs ...Message) History {
	var l Log
	for _, m := range msgs {
		l.Append(m)
	}
	return l.View()
}

func (h History) at(i int) *Message {
	p, s := locate(h.off + i)
	return &h.pages[p][s]
}

// Len returns the number of messages.
func (h History) Len() int { return h.n }

// At returns a copy of message i.
func (h History) At(i int) Message {
	if i < 0 || i >= h.n {
		panic(fmt.Sprintf("llm.History.At(%d) with length %d", i, h.n))
	}
	return h.at(i).Clone()
}

// Last returns a copy of the last message and whether there is one.
func (h History) Last() (Message, bool) {
	if h.n == 0 {
		return Message{}, false
	}
	return h.At(h.n - 1), true
}

// All iterates over copies of the messages in order.
func (h History) All() func(yield func(int, Message) bool) {
	return func(yield func(int, Message) bool) {
		for i := range h.n {
			if !yield(i, h.at(i).Clone()) {
				return
			}
		}
	}
}

// Messages returns copies of all messages.
func (h History) Messages() []Message {
	out := make([]Message, h.n)
	for i := range h.n {
		out[i] = h.at(i).Clone()
	}
	return out
}

// Append returns a history with msgs added. The receiver and every other
// view are unchanged; the result owns fresh pages.
func (h History) Append(msgs ...Message) History {
	var l Log
	for i := range h.n {
		l.Append(*h.at(i))
	}
	for _, m := range msgs {
		l.Append(m)
	}
	return l.View()
}

// Slice returns the messages [from, to) as a history, without copying, for
// plugins that compact a conversation.
func (h History) Slice(from, to int) History {
	if from < 0 || to < from || to > h.n {
		panic(fmt.Sprintf("llm.History.Slice(%d, %d) with length %d", from, to, h.n))
	}
	return History{pages: h.pages, off: h.off + from, n: to - from}
}

// Log is the append-only list behind Histories. Its owner appends; every
// View stays valid and unchanged while it does, also when read on another
// goroutine: a view never reads past its own length, pages never move, and
// the page list a view holds is capped at its length, so growing the log
// writes past it or into a fresh copy. A Log is not safe for concurrent
// appends; guard it with the owner's lock.
type Log struct {
	pages [][]Message
	n     int
}

// Append adds a copy of m.
func (l *Log) Append(m Message) {
	p, s := locate(l.n)
	if p == len(l.pages) {
		l.pages = append(l.pages, make([]Message, pageLen(p)))
	}
	l.pages[p][s] = m.Clone()
	l.n++
}

// Len returns the number of messages.
func (l *Log) Len() int { return l.n }

// View returns the current content as a read-only History, without copying.
func (l *Log) View() History {
	return History{pages: l.pages[:len(l.pages):len(l.pages)], n: l.n}
}
