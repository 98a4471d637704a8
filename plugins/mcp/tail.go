package mcp

import (
	"bytes"
	"sync"
)

// tailMax bounds what is kept of a server's stderr: enough lines to say
// why it did not start, never a growing buffer.
const tailMax = 4 << 10

// tail keeps the last tailMax bytes written to it and hands every whole
// line to line (for the log).
type tail struct {
	mu      sync.Mutex
	buf     []byte
	partial []byte
	line    func(string)
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailMax {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailMax:]...)
	}
	var lines []string
	if t.line != nil {
		t.partial = append(t.partial, p...)
		for {
			i := bytes.IndexByte(t.partial, '\n')
			if i < 0 {
				break
			}
			lines = append(lines, string(t.partial[:i]))
			t.partial = t.partial[i+1:]
		}
		if len(t.partial) > tailMax {
			lines = append(lines, string(t.partial))
			t.partial = nil
		}
	}
	t.mu.Unlock()
	for _, l := range lines {
		t.line(l)
	}
	return len(p), nil
}

// String is the kept tail, trimmed.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.buf))
}
