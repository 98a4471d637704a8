package serve

import (
	stdctx "context"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// sse writes one stream: messages and pings, one writer at a time.
type sse struct {
	mu    sync.Mutex
	w     io.Writer
	rc    *http.ResponseController
	seq   int64
	notes int64
	buf   []byte
}

// send writes an SSE message; event and notice messages carry the resume
// point as their id.
func (e *sse) send(kind string, data []byte, withID bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := append(e.buf[:0], "event: "...)
	b = append(b, kind...)
	if withID {
		b = append(b, "\nid: "...)
		b = strconv.AppendInt(b, e.seq, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, e.notes, 10)
	}
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	e.buf = b
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	return e.rc.Flush()
}

func (e *sse) ping() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := io.WriteString(e.w, ": ping\n\n"); err != nil {
		return err
	}
	return e.rc.Flush()
}

// beginSSE answers 200 with the headers of a stream.
func beginSSE(w http.ResponseWriter, seq, notice int64) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	return &sse{w: w, rc: http.NewResponseController(w), seq: seq, notes: notice}
}

// keepAlive pings out until ctx ends, and cancels the stream when a ping
// cannot be written; wait returns once it stopped.
func keepAlive(ctx stdctx.Context, cancel stdctx.CancelFunc, out *sse) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(pingEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if out.ping() != nil {
					cancel()
					return
				}
			}
		}
	}()
	return func() { <-done }
}
