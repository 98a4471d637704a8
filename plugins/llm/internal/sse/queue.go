package sse

import (
	"io"

	"github.com/dsh-go/dsh/services/llm"
)

// Queue turns events into the one-chunk-at-a-time llm.Stream shape: a
// provider's decoder appends the chunks of each event and says when the
// stream is done; Next hands them out in order and remembers the first
// error.
type Queue struct {
	pending []llm.Chunk
	// Done is set by the decoder after the stream's last event.
	Done bool
	err  error
}

// Push queues a chunk.
func (q *Queue) Push(c llm.Chunk) { q.pending = append(q.pending, c) }

// Next returns the next chunk, calling read for more events while none is
// queued. After Done it returns io.EOF; after a read error, that error.
func (q *Queue) Next(read func() error) (llm.Chunk, error) {
	for len(q.pending) == 0 {
		if q.err != nil {
			return llm.Chunk{}, q.err
		}
		if q.Done {
			return llm.Chunk{}, io.EOF
		}
		q.err = read()
	}
	c := q.pending[0]
	q.pending = q.pending[1:]
	if len(q.pending) == 0 {
		q.pending = q.pending[:0:cap(q.pending)] // reuse the array
	}
	return c, nil
}
