package serve

import (
	stdctx "context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultStreamBuffer is how many bytes a stream may leave unread by its
// client (Options.StreamBuffer): enough for a long answer's burst on a
// slow link, a tenth of what the kernel's send buffer grows to when left
// to itself.
const DefaultStreamBuffer = 256 << 10

// DefaultStreamWriteTimeout bounds one write of a stream
// (Options.StreamWriteTimeout).
const DefaultStreamWriteTimeout = 10 * time.Second

// errBehind: the client left more than the stream's buffer unread; the
// stream says so and ends.
var errBehind = errors.New("the client left more than the stream's buffer unread")

// sse writes one stream: messages and pings, one writer at a time.
//
// Two bounds keep a client that stops reading from holding the server:
// the bytes it left unread (the socket's send queue, asked of the kernel
// where it can tell) and the time one write may block. Past the first the
// stream can still write, so it sends `drop` and ends; past the second it
// cannot, and the connection is cut. Either way the client resumes from the
// last id it received.
type sse struct {
	mu    sync.Mutex
	w     io.Writer
	rc    *http.ResponseController
	seq   int64
	notes int64
	buf   []byte

	timeout time.Duration
	// limit is the most the client may leave unread; unsent reads the
	// socket's send queue (nil where it cannot be read, leaving the
	// write timeout alone to bound a stalled client). The queue is read
	// only when it could have passed the limit: queued is what it held
	// when last read, written what went out since.
	limit   int
	unsent  func() (int, bool)
	queued  int
	written int
	// stopped is set at shutdown: from then on every write fails at
	// once, whatever deadline it would set itself.
	stopped atomic.Bool
}

// send writes an SSE message; event and notice messages carry the resume
// point, seq and notes, as their id, and it becomes the stream's once
// written. It fails with errBehind, writing nothing, when the message
// would take the client's unread bytes past the limit.
func (e *sse) send(kind string, data []byte, withID bool, seq, notes int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := append(e.buf[:0], "event: "...)
	b = append(b, kind...)
	if withID {
		b = append(b, "\nid: "...)
		b = appendID(b, seq, notes)
	}
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	e.buf = b
	if e.behind(len(b)) {
		return errBehind
	}
	if err := e.write(b); err != nil {
		return err
	}
	e.seq, e.notes = seq, notes
	return nil
}

func appendID(b []byte, seq, notes int64) []byte {
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, '-')
	return strconv.AppendInt(b, notes, 10)
}

// behind says whether n more bytes would leave the client more than the
// limit unread. A message bigger than the limit still goes out once the
// client has read everything before it.
func (e *sse) behind(n int) bool {
	if e.unsent == nil || e.queued+e.written+n <= e.limit {
		return false
	}
	q, ok := e.unsent()
	if !ok {
		return false
	}
	e.queued, e.written = q, 0
	return q > 0 && q+n > e.limit
}

// write writes and flushes b under the write deadline; a large message
// gets a second more per MiB.
func (e *sse) write(b []byte) error {
	d := e.timeout + time.Duration(len(b))*time.Second/(1<<20)
	if err := e.rc.SetWriteDeadline(time.Now().Add(d)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if e.stopped.Load() {
		// stop may have set its deadline before this one replaced it.
		_ = e.rc.SetWriteDeadline(time.Now())
	}
	if _, err := e.w.Write(b); err != nil {
		return err
	}
	e.written += len(b)
	return e.rc.Flush()
}

// stop makes the stream's writes fail from now on, a blocked one included.
// It runs beside the writer: the flag comes first, so a writer that set
// its own deadline either sees it or is overtaken by this one.
func (e *sse) stop() {
	e.stopped.Store(true)
	_ = e.rc.SetWriteDeadline(time.Now())
}

func (e *sse) ping() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.write([]byte(": ping\n\n"))
}

// lastID is the id of the last event or notice the stream sent.
func (e *sse) lastID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return string(appendID(nil, e.seq, e.notes))
}

// sendLast writes a stream's last message, past the limit: the kernel's
// buffer has room for it, as the stream never fills more than the limit.
func (e *sse) sendLast(kind string, data []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := append(e.buf[:0], "event: "...)
	b = append(b, kind...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	e.buf = b
	return e.write(b)
}

// streamLimits are a stream's bounds, from Options.
type streamLimits struct {
	buffer  int
	timeout time.Duration
}

// beginSSE answers 200 with the headers of a stream. With the connection
// at hand (Serve's, not a handler mounted elsewhere), the socket's send
// buffer is set to hold the limit and the drop message after it, so a
// full buffer never blocks the stream before it can say it is dropping
// the client.
func beginSSE(w http.ResponseWriter, r *http.Request, seq, notice int64, lim streamLimits) *sse {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	if r.ProtoMajor == 1 {
		// A stream's connection ends with it: one whose client stopped
		// reading must not linger as an idle keep-alive connection
		// with the end of the stream still queued.
		h.Set("Connection", "close")
	}
	w.WriteHeader(http.StatusOK)
	e := &sse{w: w, rc: http.NewResponseController(w), seq: seq, notes: notice, timeout: lim.timeout, limit: lim.buffer}
	if c, ok := r.Context().Value(connKey{}).(net.Conn); ok && r.ProtoMajor == 1 {
		e.unsent = sendQueue(c, lim.buffer)
	}
	return e
}

// connKey holds the request's connection in its context (Serve's
// ConnContext), for the stream to read its send queue.
type connKey struct{}

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
