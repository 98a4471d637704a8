// Package ctxtest holds the test helper that disposes a dsh context or
// fiber when a test ends.
package ctxtest

import (
	stdctx "context"
	"testing"
	"time"
)

// Disposable is a *context.Context or a *context.Fiber.
type Disposable interface {
	Dispose(stdctx.Context) error
}

// cleanupDeadline bounds a test's teardown: a teardown stuck past it fails
// the test with what was still running instead of hanging the run.
const cleanupDeadline = 30 * time.Second

// Cleanup disposes d when tb ends and fails tb if a disposer failed or the
// teardown overran its deadline.
func Cleanup(tb testing.TB, d Disposable) {
	tb.Helper()
	tb.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), cleanupDeadline)
		defer cancel()
		if err := d.Dispose(ctx); err != nil {
			tb.Errorf("disposing at cleanup: %v", err)
		}
	})
}
