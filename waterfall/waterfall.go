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
//
// A next may be called on any goroutine, and is race-free: whatever calls
// it twice — one call after the other, or two goroutines at once — the rest
// of the chain runs once and every other call fails with NEXT_MISUSE. Each
// hop enters its step by one compare-and-swap on the dispatch's state, the
// one atomic write it cannot do without (see BENCHMARKS.md, issue 38).
//
// A listener that panics ends the dispatch with LISTENER_FAILED (reason
// event/panic) naming the event and the listener's fiber. On the goroutine
// that dispatched, Dispatch recovers once for every listener, instead of
// each hop recovering for the listener it runs, which had cost more than
// the rest of the hop. The trade: the panic unwinds the listeners outside
// the one that panicked — their deferred calls run, the code after their
// next does not — so they never see it as their next's error. A listener
// that must undo something when the rest of the chain fails does it in a
// defer. A next called on another goroutine recovers there instead, and
// its caller gets the panic as next's error, so a chain run there never
// crashes the process. (That is on amd64 and arm64, where a hop can tell
// the dispatch's goroutine from others; elsewhere every hop recovers, and
// the listeners outside get the panic as next's error.)
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
// event is declared, before any dispatch. It costs such an event the keep
// call per hop (and two atomic adds on a hop run on another goroutine than
// the dispatch's); the others nothing.
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
//
// A listener that panics on the goroutine that dispatched ends the
// dispatch: the panic unwinds the listeners outside it (their deferred
// calls run; the code after their next does not) and Dispatch returns
// LISTENER_FAILED naming the event and the panicking listener's fiber.
// See Next.Call for a panic on another goroutine.
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
	return w.pool.Get().(*call[P, R]).dispatch(ctx, u, t, p)
}

// dispatch runs the chain through the pooled call c. Its deferred finish
// is the one recover of every hop that runs on this goroutine (see
// Next.Call) and ends the call's generation however the chain ends: a
// return, a panic, runtime.Goexit.
func (c *call[P, R]) dispatch(ctx stdctx.Context, u, t *list[Listener[P, R]], p P) (r R, err error) {
	w := c.w
	gen := c.state.Load() // generation << 32; no step entered yet
	if g := curg(); c.owner.Load() != g {
		// Most dispatches come back to the call their goroutine used
		// last (the pool is per P): the atomic store, as dear as the
		// swap of a hop, is skipped then.
		c.owner.Store(g)
	}
	c.u, c.t = u.all(), t.all()
	n := Next[P, R]{c: c, gen: gen}
	if t != nil {
		n.gen |= scoped
	}
	// A context that can never be cancelled needs no check between hops.
	if ctx.Done() != nil {
		n.gen |= cancellable
	}
	if w.keep != nil {
		c.orig = p
		n.gen |= keeps
	}
	// Whether the listeners get spans is decided once for the dispatch:
	// a sampled-out one then pays one context lookup, not one per hop. A
	// listener that hands next a context of another trace does not change
	// it.
	if w.traced && telemetry.Records(ctx) {
		n.gen |= traced
	}
	defer c.finish(gen, &r, &err)
	return n.Call(ctx, p)
}

// finish ends a dispatch. A panic that reached it was raised on the
// dispatching goroutine, where no hop recovers: it is reported here, naming
// what c.cur says was running.
func (c *call[P, R]) finish(gen uint64, r *R, err *error) {
	if x := recover(); x != nil {
		var zero R
		*r = zero
		switch cur := c.cur; cur {
		case 0:
			*err = dispatchPanic(c.w.name, x)
		case inDefault:
			*err = defaultPanic(c.w.name, x)
		default:
			cur--
			e, _, _, _ := merge(c.u, c.t, int32(cur>>32), int32(uint32(cur)))
			*err = panicError(c.w.name, e.fiber, x)
		}
	}
	c.cur = 0
	// A new generation with no step entered: every next of this dispatch,
	// kept or still running on another goroutine, now fails its swap.
	c.state.Store(gen + 1<<32)
	if c.reading.Load() != 0 {
		// A next on another goroutine swapped in before the new
		// generation and may still be reading the snapshots or orig:
		// the call is left to the collector, never rewritten under it.
		return
	}
	c.u, c.t = nil, nil
	if c.w.keep != nil {
		var zero P
		c.orig = zero
	}
	c.w.pool.Put(c)
}

// runDefault answers a dispatch that reached the end of the chain off the
// dispatching goroutine, or that nobody listens to, with the same panic
// guard a listener has there.
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
// One word of it is shared by the hops of a dispatch, on whatever
// goroutines: state, the dispatch's generation and the number of steps
// entered (cur changes too, but only the dispatching goroutine touches it). A hop enters step k only by
// swapping k for k+1 in it, so a next called twice — one call after the
// other or two at once, on any goroutines — enters its step once, and a
// next called after its dispatch fails, the generation being over. (A
// stale next could match again only after 2^32 further dispatches through
// the same pooled call, at exactly its step.) The other fields are written
// before the dispatch's first hop and read by hops that swapped in, which
// orders the reads after the writes.
type call[P, R any] struct {
	w     *Waterfall[P, R] // set once by the pool
	state atomic.Uint64    // generation << 32 | steps entered
	// owner is the goroutine running the dispatch (curg). A hop whose
	// swap succeeds belongs to a dispatch still running; on that
	// dispatch's goroutine it can only run nested in dispatch, whose
	// recover covers it. Any other hop recovers a panic itself.
	owner atomic.Uintptr
	// cur says what runs on the owner goroutine now, for finish to name
	// in a panic: the combined position of the listener plus one,
	// inDefault for the default step, 0 for nothing yet. It is a number,
	// not a pointer, so that setting it twice a hop costs no write
	// barrier check. Only the owner reads and writes it.
	cur uint64
	// u and t are the dispatch's snapshots: the listeners outside any
	// scope, and those of the dispatch's scope.
	u, t []entry[Listener[P, R]]
	// orig is the payload of the dispatch, for an event with Keep.
	orig P
	// reading counts the hops on other goroutines between announcing
	// themselves (before their swap) and the end of their reads of u, t
	// and orig, so a dispatch pools its call (and the next one rewrites
	// them) only when no next, however late, can be reading them: a hop
	// that announces itself after the dispatch's check fails its swap.
	// The owner's hops need no such count: they are nested in the
	// dispatch, which cannot end under them.
	reading atomic.Int32
}

// The low half of Next.gen says how the event's hops run, so that a hop
// reads none of it from the Waterfall.
const (
	cancellable = 1 << iota // ctx can be cancelled: check it before each listener
	keeps                   // the event has Keep
	traced                  // the event is Traced
	scoped                  // the dispatch has a scope's listeners to merge with the others
	flagMask    = 1<<32 - 1

	inDefault = ^uint64(0) // call.cur while the default step runs
)

// Next continues a waterfall from one listener. It is a small value; pass it
// around freely, but call it at most once, and only before the listener
// returns.
//
// It is three words, so that a listener's arguments (ctx, payload, next)
// fit the registers of the Go calling convention with room for a payload
// of a few words: each hop passes them on twice.
type Next[P, R any] struct {
	c   *call[P, R]
	pos uint64 // combined position: u index << 32 | t index
	gen uint64 // generation << 32 | flags (cancellable, keeps, traced, scoped)
}

// Call runs the rest of the chain with payload p and returns its result.
// It may run on another goroutine than the listener's, if the listener
// waits for it before returning. A next called twice — one call after the
// other, or at once from two goroutines — runs the rest of the chain once:
// every other call fails with NEXT_MISUSE, as does a next called after its
// listener's dispatch returned. A listener that stops waiting for a next
// already running (gives up on a timeout, say) leaves the rest of the chain
// running on its own until its next hop, which fails with NEXT_MISUSE, and
// that result is lost.
//
// A listener that panics is reported as LISTENER_FAILED, naming the event
// and the listener's fiber. On the goroutine that dispatched, one recover
// in Dispatch catches it: the panic unwinds the listeners outside it, as a
// panicking net/http handler unwinds its middleware, so they do not see it
// as their next's error — the dispatcher does. A recover in every hop
// instead had cost more than the rest of the hop. A next called on another
// goroutine reports a panic further down to its caller, on that goroutine,
// so a chain run there never crashes the process.
func (n Next[P, R]) Call(ctx stdctx.Context, p P) (R, error) {
	c := n.c
	if c == nil {
		return n.misuse()
	}
	if !knowsG || c.owner.Load() != curg() {
		return n.elsewhere(ctx, p)
	}
	i, j := uint32(n.pos>>32), uint32(n.pos)
	k := n.gen&^flagMask | uint64(i+j)
	if !c.state.CompareAndSwap(k, k+1) {
		return n.misuse()
	}
	if n.gen&traced != 0 {
		return n.owned(ctx, p)
	}
	// The hop of every untraced event on the dispatching goroutine: all of
	// it is paid once per listener of every dispatch, and the payload is
	// passed on by value once, whatever its size.
	if n.gen&keeps != 0 && n.pos != 0 {
		// The first listener gets the original as it is; the others
		// what Keep leaves of the payload passed to them.
		p = c.w.keep(c.orig, p)
	}
	if n.gen&cancellable != 0 {
		if err := ctx.Err(); err != nil {
			var zero R
			return zero, err
		}
	}
	var fn Listener[P, R]
	pos := n.pos
	if n.gen&scoped == 0 {
		if int(i) >= len(c.u) {
			return c.runDefault(ctx, p)
		}
		fn = c.u[i].fn
		n.pos += 1 << 32
	} else {
		e, ni, nj, ok := merge(c.u, c.t, int32(i), int32(j))
		if !ok {
			return c.runDefault(ctx, p)
		}
		fn = e.fn
		n.pos = uint64(uint32(ni))<<32 | uint64(uint32(nj))
	}
	outer := c.cur
	c.cur = pos + 1
	r, err := fn(ctx, p, n)
	c.cur = outer
	return r, err
}

// owned is Call on the owner goroutine, its step entered, for a traced
// event's hop.
func (n Next[P, R]) owned(ctx stdctx.Context, p P) (R, error) {
	c := n.c
	if n.gen&keeps != 0 && n.pos != 0 {
		p = c.w.keep(c.orig, p)
	}
	return n.run(ctx, p, c.u, c.t, true)
}

// elsewhere is Call on another goroutine than the dispatch's.
func (n Next[P, R]) elsewhere(ctx stdctx.Context, p P) (R, error) {
	c := n.c
	k := n.gen&^flagMask | uint64(uint32(n.pos>>32)+uint32(n.pos))
	var orig P
	var u, t []entry[Listener[P, R]]
	c.reading.Add(1)
	ok := c.state.CompareAndSwap(k, k+1)
	if ok {
		u, t = c.u, c.t
		if n.gen&keeps != 0 {
			orig = c.orig
		}
	}
	c.reading.Add(-1)
	if !ok {
		return n.misuse()
	}
	if n.gen&keeps != 0 && n.pos != 0 {
		p = c.w.keep(orig, p)
	}
	return n.run(ctx, p, u, t, false)
}

// run runs the listener after step n.pos, entered, or the default; u and
// t are the dispatch's snapshots.
func (n Next[P, R]) run(ctx stdctx.Context, p P, u, t []entry[Listener[P, R]], owner bool) (R, error) {
	c := n.c
	if n.gen&cancellable != 0 {
		if err := ctx.Err(); err != nil {
			var zero R
			return zero, err
		}
	}
	trace := n.gen&traced != 0 && telemetry.Enabled()
	if trace {
		markPassed(ctx, c.w.name)
	}
	e, ni, nj, ok := merge(u, t, int32(n.pos>>32), int32(uint32(n.pos)))
	if !ok {
		if owner {
			return c.runDefault(ctx, p)
		}
		return c.w.runDefault(ctx, p)
	}
	next := n
	next.pos = uint64(uint32(ni))<<32 | uint64(uint32(nj))
	if !owner {
		return guarded(ctx, c, e, p, next, trace)
	}
	// On the dispatch's goroutine a traced hop unwinds on a panic as an
	// untraced one does (its span records the panic on the way): whether
	// a listener's code after next runs must not depend on sampling.
	outer := c.cur
	c.cur = n.pos + 1
	var r R
	var err error
	if trace {
		r, err = traceListener(ctx, c.w.name, e.fiber, p, next, e.fn)
	} else {
		r, err = e.fn(ctx, p, next)
	}
	c.cur = outer
	return r, err
}

// runDefault is the default step on the owner goroutine, under the
// dispatch's recover.
func (c *call[P, R]) runDefault(ctx stdctx.Context, p P) (R, error) {
	outer := c.cur
	c.cur = inDefault
	r, err := c.w.def(ctx, p)
	c.cur = outer
	return r, err
}

// guarded runs listener e with a recover of its own, for a hop on another
// goroutine than the dispatch's, where a panic would otherwise crash the
// process.
func guarded[P, R any](ctx stdctx.Context, c *call[P, R], e *entry[Listener[P, R]], p P, next Next[P, R], trace bool) (r R, err error) {
	defer func() {
		if x := recover(); x != nil {
			var zero R
			r, err = zero, panicError(c.w.name, e.fiber, x)
		}
	}()
	if trace {
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
	if n.c.state.Load()>>32 != n.gen>>32 {
		return zero, errs.New(errs.NextMisuse, fmt.Sprintf(
			"next of %q was called after the dispatch finished; call next before the listener returns and wait for its result", event))
	}
	return zero, errs.New(errs.NextMisuse, fmt.Sprintf(
		"next of %q was called twice by one listener; call it once and reuse its result", event))
}
