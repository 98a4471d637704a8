// Package waterfall provides dsh's typed events.
//
// Three kinds of event share one listener store:
//
//   - Waterfall[P, R]: listeners run in registration order and each receives
//     next. Calling next runs the rest of the chain; returning without it
//     cuts the chain short. The innermost next returns the event's default.
//     A listener holds by waiting before next and refuses by returning its
//     own result without calling it — the net/http Handler chain, typed.
//   - Emit[P]: a notification. Every listener runs; failures are logged and
//     never reach the emitter.
//   - Serial[P, R]: listeners run in order until one returns a non-zero
//     result.
//
// Listeners are registered through a *context.Context and belong to its fiber.
// A listener registered in a scope (Context.Scoped) hears only events
// dispatched with that scope's tag; one registered outside any scope hears
// every event. The tag of a dispatch is the tag of the context it is
// dispatched at.
//
// Dispatch takes a snapshot of the listener lists and never locks, so many
// goroutines can dispatch while others register.
package waterfall

import (
	stdctx "context"
	"fmt"
	"sync"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
)

// Listener is a waterfall listener. It returns next.Call(ctx, p) to pass the
// payload on (possibly a replaced one), or its own result to cut the chain.
type Listener[P, R any] func(ctx stdctx.Context, p P, next Next[P, R]) (R, error)

// Waterfall is a typed chain event. Declare it once as a package variable.
type Waterfall[P, R any] struct {
	name  string
	def   func(stdctx.Context, P) (R, error)
	local *dshctx.Local[store[Listener[P, R]]]
	pool  sync.Pool
}

// New declares a waterfall named name whose innermost step is def. A nil def
// returns the zero R.
func New[P, R any](name string, def func(ctx stdctx.Context, p P) (R, error)) *Waterfall[P, R] {
	if def == nil {
		def = func(stdctx.Context, P) (R, error) { var zero R; return zero, nil }
	}
	w := &Waterfall[P, R]{
		name:  name,
		def:   def,
		local: dshctx.NewLocal(func() *store[Listener[P, R]] { return &store[Listener[P, R]]{} }),
	}
	w.pool.New = func() any { return &call[P, R]{w: w} }
	return w
}

// Name returns the event name.
func (w *Waterfall[P, R]) Name() string { return w.name }

// On registers fn in ctx's fiber and scope. The returned off removes it early;
// otherwise it goes away with the fiber.
func (w *Waterfall[P, R]) On(ctx *dshctx.Context, fn Listener[P, R], opts ...Option) (off func(), err error) {
	return register(ctx, w.local, w.name, fn, fn == nil, opts)
}

// Dispatch runs the chain for the tag of at. ctx cancels the dispatch: it is
// checked before each listener and handed to every listener.
func (w *Waterfall[P, R]) Dispatch(ctx stdctx.Context, at *dshctx.Context, p P) (R, error) {
	if err := checkDispatch(w.name, at); err != nil {
		var zero R
		return zero, err
	}
	ctx = orBackground(ctx)
	u, t := w.local.Get(at).lists(at.Tag())
	if len(u) == 0 && len(t) == 0 {
		return w.runDefault(ctx, p)
	}
	c := w.pool.Get().(*call[P, R])
	c.u, c.t = u, t
	// A context that can never be cancelled needs no check between hops.
	c.cancellable = ctx.Done() != nil
	r, err := c.run(ctx, p)
	// Bump the generation so a next kept past the dispatch is refused, then
	// recycle the call.
	c.gen++
	c.u, c.t, c.cur = nil, nil, nil
	w.pool.Put(c)
	return r, err
}

// runDefault answers a dispatch nobody listens to, with the same panic
// guard a chain has.
func (w *Waterfall[P, R]) runDefault(ctx stdctx.Context, p P) (r R, err error) {
	defer func() {
		if x := recover(); x != nil {
			var zero R
			r, err = zero, defaultPanic(w.name, x)
		}
	}()
	return w.def(ctx, p)
}

// call is the state of one dispatch. It is pooled, so a dispatch allocates
// nothing.
//
// pos is the combined index of the last step entered and gen counts the
// dispatches the call has served; together they refuse a second next and a
// next used after its dispatch finished. They are plain fields: a listener
// that hands next to another goroutine must wait for its result before
// returning, and that wait orders the accesses.
type call[P, R any] struct {
	w           *Waterfall[P, R]
	u, t        []entry[Listener[P, R]]
	cur         *entry[Listener[P, R]] // the listener running now, to name it in a panic
	pos         int32
	gen         uint32
	cancellable bool
}

// run enters the chain. The one recover of the dispatch lives here: a hop
// costs a few nanoseconds, and a deferred recover in every hop would double
// that. A listener's panic therefore unwinds the listeners outside it, as a
// panicking net/http handler unwinds its middleware.
func (c *call[P, R]) run(ctx stdctx.Context, p P) (r R, err error) {
	defer func() {
		if x := recover(); x != nil {
			var zero R
			if c.cur == nil {
				r, err = zero, defaultPanic(c.w.name, x)
			} else {
				r, err = zero, panicError(c.w.name, c.cur.fiber, x)
			}
		}
	}()
	c.pos = -1
	return Next[P, R]{c: c, gen: c.gen}.Call(ctx, p)
}

// Next continues a waterfall from one listener. It is a small value; pass it
// around freely, but call it at most once, and only before the listener
// returns.
type Next[P, R any] struct {
	c    *call[P, R]
	i, j int32
	gen  uint32
}

// Call runs the rest of the chain with payload p and returns its result.
// Call it from the listener's own goroutine: a listener that holds waits and
// then calls next itself.
func (n Next[P, R]) Call(ctx stdctx.Context, p P) (R, error) {
	c := n.c
	if c == nil || c.gen != n.gen || c.pos != n.i+n.j-1 {
		return n.misuse()
	}
	c.pos++
	if c.cancellable {
		if err := ctx.Err(); err != nil {
			var zero R
			return zero, err
		}
	}
	e, ni, nj, ok := merge(c.u, c.t, n.i, n.j)
	if !ok {
		prev := c.cur
		c.cur = nil
		r, err := c.w.def(ctx, p)
		c.cur = prev
		return r, err
	}
	prev := c.cur
	c.cur = e
	r, err := e.fn(ctx, p, Next[P, R]{c: c, i: ni, j: nj, gen: n.gen})
	c.cur = prev
	return r, err
}

func (n Next[P, R]) misuse() (R, error) {
	var zero R
	if n.c == nil {
		return zero, errs.New(errs.NextMisuse, "next is the zero Next; use the one the listener received")
	}
	event := n.c.w.name
	if n.c.gen != n.gen {
		return zero, errs.New(errs.NextMisuse, fmt.Sprintf(
			"next of %q was called after the dispatch finished; call next before the listener returns", event))
	}
	return zero, errs.New(errs.NextMisuse, fmt.Sprintf(
		"next of %q was called twice by one listener; call it once and reuse its result", event))
}
