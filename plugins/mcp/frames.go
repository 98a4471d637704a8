package mcp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// A stdio server speaks one JSON-RPC message per line. The SDK's reader
// treats a line over its cap as a broken stream and drops the session, so
// one oversized result used to look like the server going away and cost a
// restart. frameCap sits between the server's stdout and the SDK: a line
// over the limit is read through and dropped, and when its request id can
// be found the call gets, in its place, an error result that says what
// happened. The server keeps running.

// DefaultMaxMessageBytes bounds one message from a stdio server.
const DefaultMaxMessageBytes = 16 << 20

// keepEnds is how much of each end of an oversized line is kept to find
// its id: SDKs write "id" before the result (Go) or after it
// (TypeScript).
const keepEnds = 4 << 10

type frameCap struct {
	r       *bufio.Reader
	c       io.Closer
	limit   int
	pending []byte
	err     error
	// dropped is told the size of each line dropped and whether a
	// replacement answered it.
	dropped func(n int, answered bool)
}

func newFrameCap(r io.ReadCloser, limit int, dropped func(int, bool)) *frameCap {
	return &frameCap{r: bufio.NewReaderSize(r, 64<<10), c: r, limit: limit, dropped: dropped}
}

func (f *frameCap) Close() error { return f.c.Close() }

func (f *frameCap) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		if f.err != nil {
			return 0, f.err
		}
		f.pending, f.err = f.line()
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

// line returns the next line whole, or the replacement of an oversized
// one (nothing when it has no id to answer).
func (f *frameCap) line() ([]byte, error) {
	var buf, head, tail []byte
	total, over := 0, false
	for {
		chunk, err := f.r.ReadSlice('\n')
		total += len(chunk)
		if !over && total > f.limit {
			over = true
			head = append([]byte(nil), buf[:min(len(buf), keepEnds)]...)
			buf = nil
		}
		if over {
			if len(head) < keepEnds {
				head = append(head, chunk[:min(len(chunk), keepEnds-len(head))]...)
			}
			tail = append(tail, chunk...)
			if len(tail) > keepEnds {
				tail = append(tail[:0:0], tail[len(tail)-keepEnds:]...)
			}
		} else {
			buf = append(buf, chunk...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if !over {
			return buf, err
		}
		id, ok := frameID(head, tail)
		f.dropped(total, ok)
		if !ok {
			return nil, err
		}
		return tooLarge(id, total, f.limit), err
	}
}

// tooLarge is the response that takes the place of an oversized one.
func tooLarge(id json.RawMessage, n, limit int) []byte {
	text := fmt.Sprintf("result too large (%d bytes, limit %d): the MCP server's answer was dropped and the server kept running; "+
		"ask it for less (a narrower query, a page, a summary)", n, limit)
	b, _ := json.Marshal(map[string]any{
		"jsonrpc": "2.0", "id": id,
		"result": map[string]any{"isError": true, "content": []any{map[string]any{"type": "text", "text": text}}},
	})
	return append(b, '\n')
}

// idAtEnd finds a top-level id written last: ..., "id": 7}.
var idAtEnd = lazyregexp.New(`"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?[0-9]+)\s*}\s*$`)

// frameID finds the id of a response from the ends of its line: among the
// members before the first large value, or as the last member.
func frameID(head, tail []byte) (json.RawMessage, bool) {
	d := json.NewDecoder(bytes.NewReader(head))
	if t, err := d.Token(); err == nil && t == json.Delim('{') {
		for d.More() {
			k, err := d.Token()
			if err != nil {
				break
			}
			var v json.RawMessage
			if err := d.Decode(&v); err != nil {
				break
			}
			if k == "id" {
				return v, true
			}
		}
	}
	if m := idAtEnd.FindSubmatch(tail); m != nil {
		return json.RawMessage(m[1]), true
	}
	return nil, false
}
