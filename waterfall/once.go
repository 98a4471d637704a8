package waterfall

import (
	stdctx "context"
	"sync/atomic"

	dshctx "github.com/dsh-go/dsh/context"
)

// Once registers fn to run for the first dispatch that reaches it, after
// which it removes itself: a plugin that waits for one event (the next
// message, say) needs no flag and no off of its own. A dispatch that took
// its snapshot before the removal passes through it as if it were absent.
// off removes it before it ran.
func (w *Waterfall[P, R]) Once(ctx *dshctx.Context, fn Listener[P, R], opts ...Option) (off func(), err error) {
	if fn == nil {
		return w.On(ctx, nil, opts...)
	}
	o := &once{}
	off, err = w.On(ctx, func(c stdctx.Context, p P, next Next[P, R]) (R, error) {
		if !o.claim() {
			return next.Call(c, p)
		}
		return fn(c, p, next)
	}, opts...)
	return o.arm(off, err)
}

// Once registers fn to hear the first notification that reaches it, after
// which it removes itself. See Waterfall.Once.
func (e *Emit[P]) Once(ctx *dshctx.Context, fn EmitListener[P], opts ...Option) (off func(), err error) {
	if fn == nil {
		return e.On(ctx, nil, opts...)
	}
	o := &once{}
	off, err = e.On(ctx, func(c stdctx.Context, p P) error {
		if !o.claim() {
			return nil
		}
		return fn(c, p)
	}, opts...)
	return o.arm(off, err)
}

// once is the state of a run-once listener. The listener may run on
// another goroutine before On returns its off, so whichever of the two
// comes second removes it.
type once struct {
	ran atomic.Bool
	off atomic.Pointer[func()]
}

func (o *once) claim() bool {
	if !o.ran.CompareAndSwap(false, true) {
		return false
	}
	if off := o.off.Load(); off != nil {
		(*off)()
	}
	return true
}

func (o *once) arm(off func(), err error) (func(), error) {
	if err != nil {
		return nil, err
	}
	o.off.Store(&off)
	if o.ran.Load() {
		off()
	}
	return off, nil
}
