package telemetry

import (
	stdctx "context"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
)

// maxHandoffs bounds the handoffs waiting to be taken: messages queued
// for agents that were disposed before their turn never take theirs.
const maxHandoffs = 4096

var handoffs struct {
	sync.Mutex
	m map[string]trace.SpanContext
	// n is len(m), read without the lock: a turn under sampling 0 has
	// no handoff to take and so takes no lock.
	n atomic.Int64
}

// Handoff leaves ctx's span for whoever takes key next: a message queued
// for a turn that runs on another goroutine, whose span then continues the
// input's trace. Off, or with no span, it does nothing.
func Handoff(key string, ctx stdctx.Context) {
	if !on.Load() {
		return
	}
	sc, marked := ctx.Value(handoffKey{}).(trace.SpanContext)
	if !marked {
		sc = trace.SpanContextFromContext(ctx)
	}
	if !sc.IsValid() {
		return
	}
	handoffs.Lock()
	if handoffs.m == nil || len(handoffs.m) >= maxHandoffs {
		// Rather than grow without bound, forget them all: the turns of
		// the forgotten ones start traces of their own.
		handoffs.m = map[string]trace.SpanContext{}
	}
	handoffs.m[key] = sc
	handoffs.n.Store(int64(len(handoffs.m)))
	handoffs.Unlock()
}

// TakeHandoff returns the span context left under key, once.
func TakeHandoff(key string) (trace.SpanContext, bool) {
	if !on.Load() || handoffs.n.Load() == 0 {
		return trace.SpanContext{}, false
	}
	handoffs.Lock()
	sc, ok := handoffs.m[key]
	if ok {
		delete(handoffs.m, key)
		handoffs.n.Store(int64(len(handoffs.m)))
	}
	handoffs.Unlock()
	return sc, ok
}

type handoffKey struct{}

// MarkHandoff makes ctx's current span the one Handoff leaves, whatever
// spans are started below it: the input's span, so the turn is its child
// rather than a child of admission's innermost listener.
func MarkHandoff(ctx stdctx.Context) stdctx.Context {
	if !on.Load() {
		return ctx
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ctx
	}
	return stdctx.WithValue(ctx, handoffKey{}, sc)
}
