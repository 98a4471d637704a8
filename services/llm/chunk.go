package llm

import (
	"fmt"
	"sort"
	"strings"
)

// ChunkKind says what a Chunk carries.
type ChunkKind uint8

// The chunk kinds.
const (
	ChunkText      ChunkKind = iota + 1 // Text holds a piece of the answer
	ChunkReasoning                      // Text holds a piece of the reasoning
	ChunkToolCall                       // ToolCall holds a tool-call fragment
	ChunkUsage                          // Usage holds token counts
	ChunkFinish                         // Finish ends the stream
)

var chunkKindNames = [...]string{"", "text", "reasoning", "tool-call", "usage", "finish"}

func (k ChunkKind) String() string {
	if int(k) < len(chunkKindNames) {
		return chunkKindNames[k]
	}
	return "unknown"
}

// MarshalText writes the kind's name.
func (k ChunkKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name, so a chunk written as JSON (a
// persisted session, a plugin's payload) reads back as the same chunk.
func (k *ChunkKind) UnmarshalText(text []byte) error {
	for i, name := range chunkKindNames {
		if i > 0 && name == string(text) {
			*k = ChunkKind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown chunk kind %q; known: %s", text, strings.Join(chunkKindNames[1:], ", "))
}

// FinishReason says why the model stopped.
type FinishReason string

// Finish reasons.
const (
	FinishStop      FinishReason = "stop"
	FinishToolCalls FinishReason = "tool-calls"
	FinishMaxTokens FinishReason = "max-tokens"
	FinishError     FinishReason = "error"
)

// ToolCallDelta is a fragment of a tool call. Providers send the id and
// name first and the argument text in pieces; Index joins the pieces.
type ToolCallDelta struct {
	Index     int    `json:"index"`
	ID        string `json:"id,omitempty"`
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments,omitempty"`
	// Refused, set by the model service's bounds (see Limits), says why
	// the call will not run; its arguments are dropped.
	Refused string `json:"refused,omitempty"`
}

// Chunk is one element of a model stream.
type Chunk struct {
	Kind ChunkKind `json:"kind"`
	// Text is the delta of a text or reasoning chunk.
	Text string `json:"text,omitempty"`
	// Signature is the signature of reasoning, when the provider signs it.
	Signature string         `json:"signature,omitempty"`
	ToolCall  *ToolCallDelta `json:"tool_call,omitempty"`
	Usage     *Usage         `json:"usage,omitempty"`
	Finish    FinishReason   `json:"finish,omitempty"`
	// Error describes a FinishError, keeping the provider's raw words, or
	// says which bound of Limits cut a max-tokens finish.
	Error string `json:"error,omitempty"`
}

// Assembler joins the chunks of one stream into an assistant message.
type Assembler struct {
	text, reasoning strings.Builder
	signature       string
	calls           map[int]*callParts
	usage           Usage
	finish          FinishReason
	errText         string
}

// callParts is a tool call being assembled. Its arguments grow in a
// builder: providers send them a few bytes at a time, and joining strings
// would copy the whole text again for every piece.
type callParts struct {
	ToolCall
	args strings.Builder
}

// Add takes in one chunk.
func (a *Assembler) Add(c Chunk) {
	switch c.Kind {
	case ChunkText:
		a.text.WriteString(c.Text)
	case ChunkReasoning:
		a.reasoning.WriteString(c.Text)
		if c.Signature != "" {
			a.signature = c.Signature
		}
	case ChunkToolCall:
		if c.ToolCall == nil {
			return
		}
		if a.calls == nil {
			a.calls = map[int]*callParts{}
		}
		tc := a.calls[c.ToolCall.Index]
		if tc == nil {
			tc = &callParts{}
			a.calls[c.ToolCall.Index] = tc
		}
		if c.ToolCall.ID != "" {
			tc.ID = c.ToolCall.ID
		}
		if c.ToolCall.Name != "" {
			tc.Name = c.ToolCall.Name
		}
		switch {
		case c.ToolCall.Refused != "":
			// What arrived is dropped; "{}" keeps the stored call valid
			// for every provider the history is sent to again.
			tc.Refused = c.ToolCall.Refused
			tc.args.Reset()
			tc.args.WriteString("{}")
		case tc.Refused == "":
			tc.args.WriteString(c.ToolCall.Arguments)
		}
	case ChunkUsage:
		if c.Usage != nil {
			a.usage = *c.Usage
		}
	case ChunkFinish:
		a.finish = c.Finish
		a.errText = c.Error
	}
}

// Message returns the assembled assistant message, tool calls in index
// order.
func (a *Assembler) Message() Message {
	m := Message{Role: RoleAssistant, Content: a.text.String(), Reasoning: a.reasoning.String(), ReasoningSignature: a.signature}
	if len(a.calls) > 0 {
		idx := make([]int, 0, len(a.calls))
		for i := range a.calls {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		m.ToolCalls = make([]ToolCall, len(idx))
		for k, i := range idx {
			tc := a.calls[i]
			m.ToolCalls[k] = tc.ToolCall
			m.ToolCalls[k].Arguments = tc.args.String()
		}
	}
	return m
}

// Usage returns the last usage the stream reported.
func (a *Assembler) Usage() Usage { return a.usage }

// Finish returns the finish reason and, for FinishError, its text. A stream
// that ended without a finish chunk reports "".
func (a *Assembler) Finish() (FinishReason, string) { return a.finish, a.errText }
