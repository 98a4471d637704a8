package httpx

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/llm"
)

// watchedBody is the body of a stream that has started. Each read waits at
// most the idle timeout for more bytes; then the request is cancelled and
// the read fails with ReasonStalled. The clock runs only inside Read, so a
// caller that is slow between reads (writing each chunk to the session) is
// never taken for a silent server.
type watchedBody struct {
	body    io.ReadCloser
	parent  stdctx.Context
	cancel  stdctx.CancelFunc
	idle    time.Duration
	timer   *time.Timer
	stalled atomic.Bool
	read    int64
	what    string // "provider: url", for the error
}

// watch wraps the body of a 200 answer; cancel ends its request.
func (c *Client) watch(parent stdctx.Context, body io.ReadCloser, cancel stdctx.CancelFunc, url string) io.ReadCloser {
	b := &watchedBody{body: body, parent: parent, cancel: cancel, idle: c.IdleTimeout, what: c.Provider + ": " + url}
	if b.idle > 0 {
		b.timer = time.AfterFunc(b.idle, func() { b.stalled.Store(true); cancel() })
		b.timer.Stop()
	}
	return b
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.timer != nil {
		b.timer.Reset(b.idle)
	}
	n, err := b.body.Read(p)
	if b.timer != nil {
		b.timer.Stop()
	}
	b.read += int64(n)
	if err == nil || errors.Is(err, io.EOF) {
		return n, err
	}
	if b.stalled.Load() {
		return n, b.stallError()
	}
	if cause := stdctx.Cause(b.parent); cause != nil {
		// The caller's cancellation, not a broken stream: say so.
		return n, cause
	}
	return n, err
}

func (b *watchedBody) stallError() error {
	where := "before any data"
	if b.read > 0 {
		where = fmt.Sprintf("after %d bytes", b.read)
	}
	return errs.New(llm.ProviderFailed, fmt.Sprintf(
		"%s: the stream stalled: nothing arrived for %s (idle_timeout) %s; the server may be overloaded. Retry, or raise idle_timeout in the provider's config if the model is known to think silently for longer",
		b.what, b.idle, where)).WithReason(ReasonStalled)
}

// Close ends the request first, so closing never waits on the server.
func (b *watchedBody) Close() error {
	if b.timer != nil {
		b.timer.Stop()
	}
	b.cancel()
	return b.body.Close()
}
