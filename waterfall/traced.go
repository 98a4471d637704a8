package waterfall

import (
	stdctx "context"
	"sync/atomic"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/telemetry"
)

// hop is what a traced listener's span learns from its next: when the
// listener passed the payload on. It travels in the context the listener
// hands to next.
type hop struct {
	event    string
	passedAt atomic.Int64
}

type hopKey struct{}

// traceListener runs fn inside a span of its own. The time until fn calls
// next is the time the listener held the payload; a listener that never
// calls next decided alone (an admission refusal, an answer of its own).
// The dispatch found its span recording (genTraced) before calling it.
func traceListener[P, R any](ctx stdctx.Context, event string, fiber *dshctx.Fiber, p P, next Next[P, R], fn Listener[P, R]) (R, error) {
	name := ""
	if fiber != nil {
		name = fiber.Name()
	}
	start := time.Now()
	ctx, span := telemetry.Start(ctx, event+" "+name)
	if !span.IsRecording() {
		span.End()
		return fn(ctx, p, next)
	}
	h := &hop{event: event}
	ctx = stdctx.WithValue(ctx, hopKey{}, h)
	defer func() {
		// A panic ends the span as the hop's failure and goes on
		// unwinding to whoever recovers it (the dispatch, or the hop's
		// own guard on another goroutine).
		if x := recover(); x != nil {
			telemetry.End(span, panicError(event, fiber, x))
			panic(x)
		}
	}()
	r, err := fn(ctx, p, next)
	{
		passed := h.passedAt.Load()
		held := time.Since(start)
		if passed != 0 {
			held = time.Duration(passed - start.UnixNano())
		}
		span.SetAttributes(telemetry.AttrEvent.String(event), telemetry.AttrListener.String(name),
			telemetry.AttrPassed.Bool(passed != 0), telemetry.AttrHeldSeconds.Float64(held.Seconds()))
		if passed != 0 && held > time.Millisecond {
			if m := telemetry.M(); m != nil {
				m.AdmissionHolds.Add(1, event, name)
			}
		}
	}
	telemetry.End(span, err)
	return r, err
}

// markPassed tells the traced listener whose next this is that it passed
// the payload on.
func markPassed(ctx stdctx.Context, event string) {
	if h, ok := ctx.Value(hopKey{}).(*hop); ok && h.event == event {
		h.passedAt.CompareAndSwap(0, time.Now().UnixNano())
	}
}
