package acp

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// The SDK encodes a session/update through its generated union types: the
// content block and the update are each marshalled, decoded into a map and
// marshalled again, and the params once more inside the JSON-RPC envelope.
// For a streamed chunk that is most of the pump's time between the hub's
// wake-up and the write (tens of µs, and the allocations the GC then
// collects). Text chunks are the stream's bulk and have one fixed shape,
// so the pump writes them itself; the bytes are the SDK's own (the test
// holds them equal), and every other update still goes through the SDK.

// The session/update kinds of text.
const (
	kindMessage = "agent_message_chunk"
	kindThought = "agent_thought_chunk"
)

// textUpdate encodes the session/update line carrying text as kind
// ("agent_message_chunk" or "agent_thought_chunk") into buf.
type textUpdate struct {
	buf bytes.Buffer
	enc *json.Encoder
}

func (t *textUpdate) encode(id, kind, text string) []byte {
	if t.enc == nil {
		// json.Encoder escapes as json.Marshal does (HTML characters,
		// U+2028/9, invalid UTF-8), which is what the SDK sends.
		t.enc = json.NewEncoder(&t.buf)
	}
	t.buf.Reset()
	t.buf.WriteString(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":`)
	t.str(id)
	t.buf.WriteString(`,"update":{"content":{"text":`)
	t.str(validUTF8(text))
	t.buf.WriteString(`,"type":"text"},"sessionUpdate":"`)
	t.buf.WriteString(kind)
	t.buf.WriteString("\"}}}\n")
	return t.buf.Bytes()
}

// str appends s as a JSON string.
func (t *textUpdate) str(s string) {
	_ = t.enc.Encode(s) // a string always encodes
	t.buf.Truncate(t.buf.Len() - 1)
}

// validUTF8 replaces each invalid byte of s with U+FFFD, as the SDK's
// round trip through a map does: json.Marshal alone would send the escape
// \ufffd, the same text in other bytes.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
