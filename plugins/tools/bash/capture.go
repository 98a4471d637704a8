package bash

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// capture keeps the first and the last bytes of a command's output, up to
// max in all, and counts what it dropped between them: the start says
// what ran, the end how it finished.
type capture struct {
	headMax, tailMax int
	head             []byte
	// tail holds at least the last tailMax bytes after head; it is
	// compacted when it reaches twice that, so writes stay amortized O(1).
	tail  []byte
	total int64
}

func newCapture(max int) *capture {
	h := max / 2
	return &capture{headMax: h, tailMax: max - h}
}

func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.headMax - len(c.head); room > 0 {
		take := min(room, len(p))
		c.head = append(c.head, p[:take]...)
		p = p[take:]
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) >= 2*c.tailMax {
		c.tail = append(c.tail[:0], c.tail[len(c.tail)-c.tailMax:]...)
	}
	return n, nil
}

// String is the output as the model reads it: whole when it fits, else
// head, a line saying how many bytes were cut, and tail. The cut moves to
// character boundaries so no character is split.
func (c *capture) String() string {
	if c.total <= int64(c.headMax+c.tailMax) {
		return strings.ToValidUTF8(string(c.head)+string(c.tail), "\uFFFD")
	}
	head := c.head
	head = head[:completeRunes(head)]
	tail := c.tail[len(c.tail)-c.tailMax:]
	for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
		tail = tail[1:]
	}
	cut := c.total - int64(len(head)) - int64(len(tail))
	return strings.ToValidUTF8(fmt.Sprintf("%s\n[... %d bytes of output cut here: the first %d and the last %d bytes are shown ...]\n%s",
		head, cut, len(head), len(tail), tail), "\uFFFD")
}

// completeRunes is the length of b without a character cut short at its
// end.
func completeRunes(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if utf8.FullRune(b[i:]) {
				return len(b)
			}
			return i
		}
	}
	return len(b)
}
