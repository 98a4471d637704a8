package context

import (
	stdctx "context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/errs"
	"github.com/hashicorp/go-hclog"
)

// State is where a fiber is in its life.
type State int32

// The states of a fiber. A fiber starts pending, becomes loading when every
// service it injects is active, and active once Apply returned nil. Losing a
// service takes an active fiber back through unloading to pending.
const (
	StatePending   State = iota // waiting for an injected service
	StateLoading                // Apply is running
	StateActive                 // Apply returned nil
	StateFailed                 // Apply returned an error or panicked
	StateUnloading              // its effects are being undone
	StateDisposed               // gone for good
)

var stateNames = [...]string{"pending", "loading", "active", "failed", "unloading", "disposed"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("state(%d)", int32(s))
}

// Fiber is the unit of ownership: one per applied plugin, one per scope, one
// for the root. It owns everything registered through its contexts and undoes
// it in reverse order when it is disposed.
type Fiber struct {
	tree *tree
	// parentCtx is the context the fiber was created through; its fiber is
	// the parent. Nil for the root.
	parentCtx *Context
	name      string
	tag       string
	order     int64 // see Order; set at creation, read without a lock
	plugin    Plugin
	config    any
	inject    []string

	// table is, for a scope, its services and dependents and, for a plugin
	// that injects services, the slots it was applied with. Made on first
	// use, so an idle agent's scope and most plugins cost one nil pointer;
	// guarded by tree.mu.
	table *scopeState

	// tmu serializes transitions: a load and an unload never overlap, and a
	// dispose waits for an in-flight Apply.
	tmu sync.Mutex

	mu      sync.Mutex
	state   State
	life    *life // the current activation; nil while pending, failed or disposed
	err     error // why Apply failed
	changed chan struct{}
	link    *effect // this fiber's entry in its parent's effects
	// disposeAfterLoad is set when the fiber's own context asked to be
	// disposed while its Apply ran.
	disposeAfterLoad bool
	// wasActive is set once an Apply succeeded: a later failure (a re-apply
	// after an injected service changed) has nobody awaiting it.
	wasActive bool
	// isScope is set on the root and on Scoped fibers: they hold services.
	isScope bool
	// disposing is set while a Dispose that stopped waiting may still be
	// about to start the teardown, so Await does not report the fiber
	// active in between.
	disposing bool
	// running is the effect being undone, to name in a dispose timeout.
	running *effect

	logger atomic.Pointer[hclog.Logger]
}

// Name is the fiber's name: the plugin's Name, its Go type, or "scope:<tag>".
func (f *Fiber) Name() string { return f.name }

// Order is the fiber's ordering key: where the listeners registered
// through it (and through the fibers and scopes it creates, which inherit
// the key) run among those of other fibers. 0, the default, orders them
// by registration. A host gives each configured entry a key, so that an
// entry it restarts on reload keeps the place of its config position
// instead of going after every listener registered since; package
// waterfall hands out the keys and sorts by them.
func (f *Fiber) Order() int64 { return f.order }

// Tag is the scope tag the fiber carries ("" outside any scope).
func (f *Fiber) Tag() string { return f.tag }

// State reports the fiber's current state.
func (f *Fiber) State() State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state
}

// Err returns why the fiber failed, or nil.
func (f *Fiber) Err() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// Await blocks until the fiber has settled — active, failed or disposed — or
// ctx ends. It returns nil for an active fiber, the apply error for a failed
// one, and a CONTEXT_INACTIVE error for a fiber disposed before it settled.
func (f *Fiber) Await(ctx stdctx.Context) error {
	for {
		f.mu.Lock()
		st, err := f.state, f.err
		if f.changed == nil {
			f.changed = make(chan struct{})
		}
		ch := f.changed
		disposing := f.disposing
		f.mu.Unlock()
		switch st {
		case StateActive:
			if disposing {
				break
			}
			return nil
		case StateFailed:
			return err
		case StateDisposed:
			if err != nil {
				return err
			}
			return f.inactive()
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return errs.Wrap(errs.ContextInactive, ctx.Err(),
				fmt.Sprintf("stopped waiting for fiber %q while it was %s", f.name, st))
		}
	}
}

// Dispose undoes everything the fiber registered, in reverse order, and marks
// it disposed. It waits for an in-flight Apply to return first. Disposing
// twice is harmless. From inside Apply, use the Context's Dispose, which
// cannot wait for itself and disposes right after Apply returns.
//
// It returns the errors of the disposers that failed or panicked, joined,
// each naming the fiber and the effect; they are also logged once, where
// they happen. Disposers registered with OnDisposeCtx receive ctx.
//
// ctx bounds the waiting, not the teardown: when ctx ends first, Dispose
// returns a CONTEXT_INACTIVE error (reason context/dispose-timeout) naming
// the Apply or effect still running. The teardown is never left half done:
// it goes on in the background, the remaining effects run in order, and
// the fiber reaches StateDisposed when the last returns. Until then State
// reports loading (an Apply was in flight), active (the teardown has not
// started yet) or unloading, and Await blocks; Await returns once the fiber
// is disposed. Errors of disposers that fail after the deadline are only
// logged. A nil or never-ending ctx waits as long as the teardown takes.
func (f *Fiber) Dispose(ctx stdctx.Context) error {
	if ctx == nil || ctx.Done() == nil {
		return f.dispose(stdctx.Background())
	}
	f.mu.Lock()
	f.disposing = true
	f.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- f.dispose(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		// A teardown that finished at the deadline still reports its own
		// result rather than a timeout.
		select {
		case err := <-done:
			return err
		default:
		}
		return errs.Wrap(errs.ContextInactive, ctx.Err(), fmt.Sprintf(
			"dispose of fiber %q stopped waiting: %s was still running; the rest of the teardown goes on in the background and the fiber is disposed when it ends (Await reports it); give Dispose a longer deadline or make that teardown honour its ctx",
			f.name, f.stillRunning())).WithReason("context/dispose-timeout")
	}
}

func (f *Fiber) dispose(ctx stdctx.Context) error {
	f.tmu.Lock()
	defer f.tmu.Unlock()
	f.mu.Lock()
	st, l := f.state, f.life
	f.mu.Unlock()
	if st == StateDisposed {
		return nil
	}
	var err error
	if l != nil {
		f.setState(StateUnloading, nil)
		err = l.end(ctx, nil)
	}
	f.tree.forget(f)
	f.tree.unlink(f)
	f.mu.Lock()
	f.life = nil
	link := f.link
	f.link = nil
	f.disposing = false
	f.mu.Unlock()
	f.setState(StateDisposed, nil)
	if link != nil {
		link.owner.drop(link)
	}
	return err
}

// stillRunning names what a dispose is waiting for, following the effect
// being undone down into the child fiber it disposes.
func (f *Fiber) stillRunning() string {
	for {
		f.mu.Lock()
		st, e := f.state, f.running
		f.mu.Unlock()
		switch {
		case e != nil && e.child != nil:
			f = e.child
		case e != nil:
			return fmt.Sprintf("the disposer of effect %q of fiber %q", e.label, f.name)
		case st == StateLoading:
			return fmt.Sprintf("the Apply of fiber %q", f.name)
		default:
			return fmt.Sprintf("the teardown of fiber %q (%s)", f.name, st)
		}
	}
}

// Children returns the plugin and scope fibers currently registered through
// the fiber's active context, in registration order.
func (f *Fiber) Children() []*Fiber {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.life == nil {
		return nil
	}
	var out []*Fiber
	for _, e := range f.life.effects {
		if e.child != nil {
			out = append(out, e.child)
		}
	}
	return out
}

// Parent returns the fiber this one was created under; nil for the root.
func (f *Fiber) Parent() *Fiber {
	if f.parentCtx == nil {
		return nil
	}
	return f.parentCtx.life.fiber
}

// Logger returns the fiber's logger, named after it.
func (f *Fiber) Logger() hclog.Logger {
	if l := f.logger.Load(); l != nil {
		return *l
	}
	l := f.tree.logger
	if f.parentCtx != nil {
		l = l.Named(f.name)
	}
	f.logger.Store(&l)
	return l
}

func (f *Fiber) inactive() *errs.Error {
	return errs.New(errs.ContextInactive,
		fmt.Sprintf("the context of fiber %q is inactive: it was unloaded or disposed; register and read through the context of an active fiber", f.name))
}

// setState records a transition and tells the watchers. It must be called
// with tmu held (or during construction).
func (f *Fiber) setState(to State, err error) {
	f.mu.Lock()
	from := f.state
	f.state = to
	if err != nil {
		f.err = err
	}
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
	f.mu.Unlock()
	if from != to {
		f.tree.notify(FiberChange{Fiber: f, From: from, To: to, Err: err})
	}
}

// load applies the plugin if the fiber is pending and every injected service
// is active, then honours a dispose its context asked for meanwhile.
func (f *Fiber) load() {
	f.tmu.Lock()
	f.loadLocked()
	f.tmu.Unlock()
	f.mu.Lock()
	again := f.disposeAfterLoad
	f.disposeAfterLoad = false
	f.mu.Unlock()
	if again {
		// Nobody waits for this dispose: its disposers' errors are logged.
		_ = f.dispose(stdctx.Background())
	}
}

func (f *Fiber) loadLocked() {
	if f.State() != StatePending || !f.parentActive() || !f.tree.bind(f) {
		return
	}
	l := newLife(f)
	f.mu.Lock()
	f.life = l
	f.mu.Unlock()
	f.setState(StateLoading, nil)

	if err := f.apply(l.ctx); err != nil {
		_ = l.end(stdctx.Background(), nil)
		f.tree.unbind(f)
		f.mu.Lock()
		f.life = nil
		f.mu.Unlock()
		// The first Apply's error is the caller's to report: Plugin's
		// caller gets it from Await, and logging it here too would show an
		// operator every start-up failure twice. A re-apply has no caller.
		f.mu.Lock()
		reapply := f.wasActive
		f.mu.Unlock()
		if reapply {
			f.Logger().Error("plugin failed", "error", err)
		} else {
			f.Logger().Debug("plugin failed", "error", err)
		}
		f.setState(StateFailed, err)
		return
	}
	f.mu.Lock()
	f.wasActive = true
	f.mu.Unlock()
	f.setState(StateActive, nil)
	f.tree.activate(l)
}

// apply runs Apply and turns a panic into an error.
func (f *Fiber) apply(ctx *Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f.Logger().Debug("plugin panic", "stack", string(debug.Stack()))
			err = errs.New(errs.PluginFailed, fmt.Sprintf("plugin %q panicked in Apply: %v", f.name, r)).WithReason("context/panic")
		}
	}()
	if e := f.plugin.Apply(ctx, f.config); e != nil {
		return errs.Wrap(errs.PluginFailed, e, fmt.Sprintf("plugin %q failed to apply", f.name))
	}
	return nil
}

// unload takes an active fiber back to pending because an injected service
// went away; it runs its effects while the service can still be read.
func (f *Fiber) unload(why *errs.Error) {
	// A fiber already on its way out is left alone: it may be the very fiber
	// whose teardown withdrew the service, and its tmu is held.
	if st := f.State(); st != StateActive && st != StateLoading {
		return
	}
	f.tmu.Lock()
	defer f.tmu.Unlock()
	f.mu.Lock()
	st, l := f.state, f.life
	f.mu.Unlock()
	if st != StateActive || l == nil {
		return
	}
	f.setState(StateUnloading, nil)
	_ = l.end(stdctx.Background(), why)
	f.tree.unbind(f)
	f.mu.Lock()
	f.life = nil
	f.mu.Unlock()
	f.setState(StatePending, nil)
}

// parentActive reports whether the activation f was created through is still
// active. A fiber whose parent is winding down stays pending: a service
// withdrawn during that teardown must not re-apply a fiber about to go.
func (f *Fiber) parentActive() bool {
	if f.parentCtx == nil {
		return true
	}
	pl := f.parentCtx.life
	pl.fiber.mu.Lock()
	defer pl.fiber.mu.Unlock()
	return pl.phase == phaseActive
}

// life is one activation of a fiber: the effects registered through it and
// the channel behind Context.Done.
type life struct {
	fiber   *Fiber
	ctx     *Context
	phase   phase // guarded by fiber.mu
	effects []*effect
	done    chan struct{}
	err     error
	// after holds the functions Context.AfterFunc registered, to start
	// when done closes.
	after map[*func()]struct{}
}

type phase uint8

const (
	phaseActive    phase = iota // effects may be added
	phaseUnloading              // effects are being undone; services still readable
	phaseEnded
)

// effect is one thing to undo: a plain disposer, a ctx-taking one, or a
// child fiber to dispose (then both are nil).
type effect struct {
	label      string
	dispose    func() error
	disposeCtx func(stdctx.Context) error
	owner      *life
	child      *Fiber // set when the effect is a child plugin or scope
}

func newLife(f *Fiber) *life {
	l := &life{fiber: f}
	l.ctx = &Context{life: l, parent: f.parentCtx}
	return l
}

// add registers an effect; it fails once the activation is winding down.
func (l *life) add(label string, dispose func() error, disposeCtx func(stdctx.Context) error, child *Fiber) (*effect, error) {
	f := l.fiber
	f.mu.Lock()
	defer f.mu.Unlock()
	if l.phase != phaseActive {
		return nil, f.inactive()
	}
	e := &effect{label: label, dispose: dispose, disposeCtx: disposeCtx, owner: l, child: child}
	l.effects = append(l.effects, e)
	return e, nil
}

// drop removes an effect without running it and reports whether it was still
// registered; whoever gets true owns running its disposer.
func (l *life) drop(e *effect) bool {
	f := l.fiber
	f.mu.Lock()
	defer f.mu.Unlock()
	// Most effects are removed in reverse order of registration, so search
	// from the end.
	for i := len(l.effects) - 1; i >= 0; i-- {
		if l.effects[i] == e {
			copy(l.effects[i:], l.effects[i+1:])
			l.effects[len(l.effects)-1] = nil
			l.effects = l.effects[:len(l.effects)-1]
			return true
		}
	}
	return false
}

// end closes Done, then runs every effect in reverse order, passing ctx to
// the disposers that take one. why is what Err reports afterwards; nil means
// the plain "inactive" error. A failing or panicking disposer is logged and
// the rest still run; their errors are returned joined.
func (l *life) end(ctx stdctx.Context, why error) error {
	f := l.fiber
	f.mu.Lock()
	if l.phase != phaseActive {
		f.mu.Unlock()
		return nil
	}
	l.phase = phaseUnloading
	l.err = why
	if l.done != nil {
		close(l.done)
	} else {
		l.done = closedChan
	}
	effects := l.effects
	l.effects = nil
	after := l.after
	l.after = nil
	f.mu.Unlock()

	for fn := range after {
		go (*fn)()
	}

	var failed []error
	for i := len(effects) - 1; i >= 0; i-- {
		e := effects[i]
		f.mu.Lock()
		f.running = e
		f.mu.Unlock()
		if err := runDisposer(ctx, f, e); err != nil {
			failed = append(failed, err)
		}
	}

	f.mu.Lock()
	f.running = nil
	l.phase = phaseEnded
	f.mu.Unlock()
	return errors.Join(failed...)
}

// runDisposer undoes one effect. It logs a failure where it happens and
// returns it wrapped; a child fiber's errors are already both, so they pass
// through as they are.
func runDisposer(ctx stdctx.Context, f *Fiber, e *effect) (err error) {
	defer func() {
		if r := recover(); r != nil {
			f.Logger().Error("disposer panicked", "effect", e.label, "panic", r)
			err = errs.New(errs.PluginFailed, fmt.Sprintf(
				"fiber %q: the disposer of effect %q panicked: %v; the rest of the teardown ran, fix the disposer", f.name, e.label, r)).WithReason("context/dispose-panic")
		}
	}()
	switch {
	case e.child != nil && e.dispose == nil && e.disposeCtx == nil:
		return e.child.dispose(ctx)
	case e.disposeCtx != nil:
		err = e.disposeCtx(ctx)
	default:
		err = e.dispose()
	}
	if err == nil {
		return nil
	}
	f.Logger().Error("disposer failed", "effect", e.label, "error", err)
	return errs.Wrap(errs.PluginFailed, err, fmt.Sprintf(
		"fiber %q: the disposer of effect %q failed; the rest of the teardown ran, and what this one undoes may be left behind until its cause is fixed", f.name, e.label)).WithReason("context/dispose-failed")
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()
