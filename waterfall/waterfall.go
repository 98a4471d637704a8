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
// "Registration order" is refined by ordering keys: listeners of a fiber
// that carries one (context.Fiber.Order, taken from Position) run at the
// key's place, so a host that restarts a configured plugin with its old key
// keeps it where the config puts it. Without keys nothing changes.
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
	"github.com/dsh-go/dsh/telemetry"
	"sync"
	"sync/atomic"

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
	// keep restores what no listener may change (see Keep); nil for most.
	keep func(orig, passed P) P
	// traced puts a span around each listener when telemetry is on (see
	// Traced); false for most events, which cost nothing more.
	traced bool
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

// Keep makes part of the payload immutable down the chain: every listener
// after the first, and the default, receives keep(orig, passed), where orig
// is the payload the dispatch began with and passed what the listener
// before handed to next. It is for what the dispatcher vouches for and no
// listener may change — who sent a message, whom a tool call acts for —
// while the rest stays a listener's to rewrite. Call it once where the
// event is declared, before any dispatch. It costs such an event two
// atomic adds and the keep call per hop; the others nothing.
func (w *Waterfall[P, R]) Keep(keep func(orig, passed P) P) *Waterfall[P, R] {
	w.keep = keep
	return w
}

// Traced makes each listener of the event a span of its own while
// telemetry is on: named after the event, with the listener's plugin, how
// long it held the payload before passing it on and whether it passed it
// at all. It is for the few events whose listeners decide (admission):
// a span per hop of every event would drown a trace. Call it once where
// the event is declared.
func (w *Waterfall[P, R]) Traced() *Waterfall[P, R] {
	w.traced = true
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
	u, t := w.local.Get(at).snapshots(at.Tag())
	if u == nil && t == nil {
		return w.runDefault(ctx, p)
	}
	c := w.pool.Get().(*call[P, R])
	if w.keep != nil {
		c.orig = p
	}
	gen := uint32(c.state.Load() >> 32)
	// A context that can never be cancelled needs no check between hops.
	n := Next[P, R]{c: c, u: u, t: t, gen: uint64(gen) << genShift}
	if ctx.Done() != nil {
		n.gen |= genCancellable
	}
	// Whether the listeners get spans is decided once for the dispatch:
	// a sampled-out one then pays one context lookup, not one per hop.
	if w.traced && telemetry.Records(ctx) {
		n.gen |= genTraced
	}
	r, err := n.Call(ctx, p)
	// A new generation with no step entered: every next of this dispatch,
	// kept or still running on another goroutine, now fails its swap.
	c.state.Store(uint64(gen+1) << 32)
	if w.keep != nil {
		if c.reading.Load() != 0 {
			// A next kept past this dispatch swapped in before the new
			// generation and may still be reading orig: the call is
			// left to the collector, never rewritten under it.
			return r, err
		}
		var zero P
		c.orig = zero
	}
	w.pool.Put(c)
	return r, err
}

// runDefault answers a dispatch that reached the end of the chain, or that
// nobody listens to, with the same panic guard a listener has.
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
// nothing, and made safe to pool by holding a single word that changes: the
// dispatch's generation and the number of steps it entered. Everything else
// a next needs travels in the Next value itself, so a next handed to another
// goroutine — even one its listener stopped waiting for, while the call
// already serves another dispatch — reads only that word, atomically, and
// its swap fails once its generation is over. (A stale next could match
// again only after 2^32 further dispatches through the same pooled call,
// at exactly its step.)
type call[P, R any] struct {
	w     *Waterfall[P, R] // set once by the pool
	state atomic.Uint64    // generation << 32 | steps entered
	// orig is the payload of the dispatch, for an event with Keep. It is
	// read right after a hop's swap; reading counts the hops between
	// announcing the read (before their swap) and its end, so a dispatch
	// pools its call (and the next one rewrites orig) only when no next,
	// however late, can be reading it: a hop that announces itself after
	// the dispatch's check fails its swap, the generation being over.
	orig    P
	reading atomic.Int32
}

// Next continues a waterfall from one listener. It is a small value; pass it
// around freely, but call it at most once, and only before the listener
// returns.
//
// Its fields are packed into five words so that a listener's arguments
// (ctx, payload, next) still fit the registers of the Go calling convention
// for a small payload; spilling them to the stack doubled the cost of a hop.
type Next[P, R any] struct {
	c    *call[P, R]
	u, t *list[Listener[P, R]] // the dispatch's snapshots, immutable
	pos  uint64                // combined position: u index << 32 | t index
	gen  uint64                // generation << genShift | genCancellable | genTraced
}

// Flags of Next.gen below the generation.
const (
	// genCancellable: the dispatch's ctx can be cancelled, so each hop
	// checks it.
	genCancellable = 1 << iota
	// genTraced: the event is Traced and the dispatch's span records,
	// so each listener runs in a span of its own. A listener that hands
	// next a context of another trace does not change it.
	genTraced
	genShift = iota
)

// Call runs the rest of the chain with payload p and returns its result.
// It may run on another goroutine than the listener's, if the listener
// waits for it before returning. A next called twice, or after its
// listener's dispatch returned, fails with NEXT_MISUSE; a listener that
// stops waiting for a next already running (gives up on a timeout, say)
// leaves the rest of the chain running on its own until its next hop, which
// fails with NEXT_MISUSE, and that result is lost.
//
// A listener that panics is reported as LISTENER_FAILED to whoever called
// the next that ran it, on that caller's goroutine: the listeners outside
// it see an error instead of being unwound.
func (n Next[P, R]) Call(ctx stdctx.Context, p P) (r R, err error) {
	c := n.c
	if c == nil {
		return n.misuse()
	}
	i, j := int32(n.pos>>32), int32(uint32(n.pos))
	k := n.gen>>genShift<<32 | uint64(uint32(i+j))
	// The first listener gets the original as it is; the others what
	// Keep leaves of the payload passed to them.
	keep := c.w.keep != nil && i+j != 0
	if keep {
		c.reading.Add(1)
	}
	if !c.state.CompareAndSwap(k, k+1) {
		if keep {
			c.reading.Add(-1)
		}
		return n.misuse()
	}
	if keep {
		orig := c.orig
		c.reading.Add(-1)
		p = c.w.keep(orig, p)
	}
	if n.gen&genCancellable != 0 {
		if err := ctx.Err(); err != nil {
			var zero R
			return zero, err
		}
	}
	if n.gen&genTraced != 0 {
		markPassed(ctx, c.w.name)
	}
	e, ni, nj, ok := merge(n.u.all(), n.t.all(), i, j)
	if !ok {
		return c.w.runDefault(ctx, p)
	}
	defer func() {
		if x := recover(); x != nil {
			var zero R
			r, err = zero, panicError(c.w.name, e.fiber, x)
		}
	}()
	next := n
	next.pos = uint64(uint32(ni))<<32 | uint64(uint32(nj))
	if n.gen&genTraced != 0 {
		return traceListener(ctx, c.w.name, e.fiber, p, next, e.fn)
	}
	return e.fn(ctx, p, next)
}

func (n Next[P, R]) misuse() (R, error) {
	var zero R
	if n.c == nil {
		return zero, errs.New(errs.NextMisuse, "next is the zero Next; use the one the listener received")
	}
	event := n.c.w.name
	if n.c.state.Load()>>32 != n.gen>>genShift {
		return zero, errs.New(errs.NextMisuse, fmt.Sprintf(
			"next of %q was called after the dispatch finished; call next before the listener returns and wait for its result", event))
	}
	return zero, errs.New(errs.NextMisuse, fmt.Sprintf(
		"next of %q was called twice by one listener; call it once and reuse its result", event))
}
