// Package context is the tree that dsh is built on: fibers, effects, services
// and scopes.
//
// A root Context is made with New. Every plugin applied through a context gets
// its own Fiber, and everything registered through the plugin's context —
// listeners, services, child plugins, explicit effects — belongs to that fiber
// and is undone in reverse order when it is disposed. Services are mounted
// under typed keys; a plugin that injects a key runs only while the key has an
// active provider. Scopes (Context.Scoped) carry a tag, usually an agent id,
// that event listeners use to hear only their agent.
//
// Scopes own services (cordis isolate): a service is registered in the scope
// of the fiber that provides it — the nearest Scoped context, or the root —
// and a lookup walks from the reader's scope out to the root, so the nearest
// provider wins. A preset mounted in an agent's scope therefore provides
// what that agent's plugins see, the root and other agents keep theirs, and
// the same preset works for any number of agents; two providers of one key
// conflict only within one scope. A plugin that injects a key is applied
// against what the key resolves to from its scope, unloaded when that
// provider goes (and applied again against one further out, if any), and
// applied again when a closer provider arrives. Code that reads through a
// scope's own context, such as an agent's, is outside any plugin and may
// read every service; Key.Own keeps one instance of a service per scope.
//
// *Context also satisfies the standard library's context.Context: Done closes
// when the fiber's activation ends, so goroutines a plugin starts stop with it.
//
// The package shares its name with the standard library's; import it under a
// short alias when both are needed:
//
//	import dshctx "github.com/dsh-go/dsh/context"
package context

import (
	stdctx "context"
	"fmt"
	"os"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/hashicorp/go-hclog"
)

// Context is a view on one activation of a fiber. It is what a plugin receives
// in Apply and what it registers through. A Context must not be copied.
type Context struct {
	life   *life
	parent *Context
}

var _ stdctx.Context = (*Context)(nil)

// Option configures a root context.
type Option func(*tree)

// WithLogger makes the tree log through l instead of a default stderr logger.
func WithLogger(l hclog.Logger) Option {
	return func(t *tree) {
		if l != nil {
			t.logger = l
		}
	}
}

// New returns the root of a new tree. The root is active until Dispose; it can
// provide and read every service.
func New(opts ...Option) *Context {
	t := newTree()
	for _, o := range opts {
		o(t)
	}
	if t.logger == nil {
		t.logger = hclog.New(&hclog.LoggerOptions{Name: "dsh", Output: os.Stderr, Level: hclog.Info})
	}
	f := &Fiber{tree: t, name: "root", state: StateActive, isScope: true}
	l := newLife(f)
	f.life = l
	t.root = f
	return l.ctx
}

// Fiber returns the fiber this context is a view on.
func (c *Context) Fiber() *Fiber { return c.life.fiber }

// Tag returns the scope tag of the context ("" outside any scope).
func (c *Context) Tag() string { return c.life.fiber.tag }

// Logger returns the fiber's logger.
func (c *Context) Logger() hclog.Logger { return c.life.fiber.Logger() }

// Scope returns the context of the scope c is in: the nearest Scoped context
// at or above c, or the root. A service that keeps something per scope
// provides it through this context, so it lives exactly as long as the
// scope. It returns nil once that scope is disposed.
func (c *Context) Scope() *Context {
	sc := c.life.fiber.home()
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.life == nil {
		return nil
	}
	return sc.life.ctx
}

// Root returns the root context of the tree.
func (c *Context) Root() *Context {
	r := c.life.fiber.tree.root
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.life != nil {
		return r.life.ctx
	}
	return c
}

// Active reports whether things can still be registered through c.
func (c *Context) Active() bool {
	f := c.life.fiber
	f.mu.Lock()
	defer f.mu.Unlock()
	return c.life.phase == phaseActive
}

// Dispose disposes the fiber behind c and returns its disposers' errors;
// see Fiber.Dispose for how ctx bounds it. Called while the fiber is still
// applying through this very context — from inside its own Apply,
// typically — it cannot wait for that apply to finish, so the fiber is
// disposed right after Apply returns instead, and Dispose returns nil: the
// errors of that later teardown are logged.
func (c *Context) Dispose(ctx stdctx.Context) error {
	f := c.life.fiber
	f.mu.Lock()
	if f.state == StateLoading && f.life == c.life {
		f.disposeAfterLoad = true
		f.mu.Unlock()
		return nil
	}
	f.mu.Unlock()
	return f.Dispose(ctx)
}

// Plugin applies p with config in a new child fiber and returns the fiber.
// The fiber is applied at once when every service it injects is active, and
// stays pending otherwise. The returned error covers only bad arguments —
// among them a config a Defined plugin refuses (see Defined.Config), found
// here even while the fiber would wait for its services — and an inactive
// c; whether Apply failed is reported by the fiber's Await, and
// only a later re-apply's failure, which nobody awaits, is logged as an
// error.
func (c *Context) Plugin(p Plugin, config any) (*Fiber, error) {
	return c.PluginAt(0, p, config)
}

// PluginAt is Plugin with the new fiber's ordering key set to order (see
// Fiber.Order): a host re-applying a configured entry passes the key of
// the instance it replaces, so the new one's listeners take its place.
// 0 inherits c's key, as Plugin does.
func (c *Context) PluginAt(order int64, p Plugin, config any) (*Fiber, error) {
	if order == 0 {
		order = c.life.fiber.order
	}
	if p == nil {
		return nil, errs.New(errs.InvalidArgument, "Plugin: the plugin is nil; pass a value that implements Apply")
	}
	if d, ok := p.(defined); ok {
		c, err := d.check(config)
		if err != nil {
			return nil, err
		}
		config = c
	}
	f := &Fiber{
		tree:      c.life.fiber.tree,
		parentCtx: c,
		name:      pluginName(p),
		tag:       c.life.fiber.tag,
		order:     order,
		plugin:    p,
		config:    config,
	}
	if inj, ok := p.(Injector); ok {
		for _, k := range inj.Inject() {
			if k == nil || k.Name() == "" {
				return nil, errs.New(errs.InvalidArgument,
					fmt.Sprintf("plugin %q injects a nil or unnamed service key; build keys with NewKey", f.name))
			}
			f.inject = append(f.inject, k.Name())
		}
	}
	if err := c.adopt(f, f.name); err != nil {
		return nil, err
	}
	f.tree.track(f)
	f.load()
	return f, nil
}

// Scoped returns a child scope carrying tag. Listeners registered through it,
// and through plugins applied in it, hear only events dispatched with that
// tag. Services provided in it are what the plugins in it see, shadowing the
// ones around it; the scope's own context reads as code outside any plugin.
// Disposing the scope removes everything registered through it.
func (c *Context) Scoped(tag string) (*Context, error) {
	if tag == "" {
		return nil, errs.New(errs.InvalidArgument, "Scoped: the tag is empty; pass the id the scope belongs to, such as an agent id")
	}
	parent := c.life.fiber
	f := &Fiber{
		tree:      parent.tree,
		parentCtx: c,
		name:      "scope:" + tag,
		tag:       tag,
		order:     parent.order,
		state:     StateActive,
		isScope:   true,
	}
	l := newLife(f)
	f.life = l
	if err := c.adopt(f, f.name); err != nil {
		return nil, err
	}
	return l.ctx, nil
}

// adopt registers child as an effect of c, so disposing c disposes it.
func (c *Context) adopt(child *Fiber, label string) error {
	e, err := c.life.add(label, nil, nil, child)
	if err != nil {
		return err
	}
	child.mu.Lock()
	child.link = e
	child.mu.Unlock()
	return nil
}

// Disposer undoes what a setup did. Its error is logged where it happens
// and returned by the Dispose that ran it; it never stops the other
// disposers. A teardown that can block (a final write, stopping a process)
// should be registered with OnDisposeCtx instead, so the disposing caller's
// deadline reaches it.
type Disposer func() error

// Effect runs setup now and registers the disposer it returns, to run when
// the fiber is disposed or unloaded. The returned off function runs the
// disposer early (once). If setup fails nothing is registered.
func (c *Context) Effect(label string, setup func() (Disposer, error)) (off func(), err error) {
	if setup == nil {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("Effect %q: setup is nil", label))
	}
	if !c.Active() {
		return nil, c.life.fiber.inactive()
	}
	d, err := setup()
	if err != nil {
		return nil, err
	}
	if d == nil {
		d = func() error { return nil }
	}
	off, err = c.OnDispose(label, d)
	if err != nil {
		// The fiber went away while setup ran: undo at once so nothing leaks.
		_ = runDisposer(stdctx.Background(), c.life.fiber, &effect{label: label, dispose: d})
		return nil, err
	}
	return off, nil
}

// OnDispose registers d to run when the fiber is disposed or unloaded. The
// returned off function runs it early, once. It is the primitive that event
// listeners and services build on.
func (c *Context) OnDispose(label string, d Disposer) (off func(), err error) {
	if d == nil {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("OnDispose %q: the disposer is nil", label))
	}
	return c.onDispose(label, d, nil)
}

// OnDisposeCtx is OnDispose for a teardown that can block: d receives the
// ctx given to Dispose, so the caller's deadline bounds it, and its error
// reaches that caller. When the fiber is unloaded (an injected service went
// away) or off runs it early, d gets a context that never ends.
func (c *Context) OnDisposeCtx(label string, d func(stdctx.Context) error) (off func(), err error) {
	if d == nil {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("OnDisposeCtx %q: the disposer is nil", label))
	}
	return c.onDispose(label, nil, d)
}

func (c *Context) onDispose(label string, d Disposer, dc func(stdctx.Context) error) (off func(), err error) {
	e, err := c.life.add(label, d, dc, nil)
	if err != nil {
		return nil, err
	}
	l := c.life
	return func() {
		if l.drop(e) {
			// Whoever turns an effect off early has no way to hear its
			// error; it is logged.
			_ = runDisposer(stdctx.Background(), l.fiber, e)
		}
	}, nil
}

// Deadline implements context.Context; fibers have no deadline.
func (c *Context) Deadline() (time.Time, bool) { return time.Time{}, false }

// Done implements context.Context: the channel closes when this activation of
// the fiber ends (dispose, unload, or a failed Apply).
func (c *Context) Done() <-chan struct{} {
	f := c.life.fiber
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.life.done == nil {
		c.life.done = make(chan struct{})
	}
	return c.life.done
}

// AfterFunc arranges for fn to run in its own goroutine once Done closes —
// at once if it already has — and returns a stop function that cancels
// that if fn has not started (it reports whether it did). The standard
// library's context.WithCancel, WithTimeout and AfterFunc use it, so a
// context derived from a *Context needs no goroutine watching Done.
func (c *Context) AfterFunc(fn func()) (stop func() bool) {
	l := c.life
	f := l.fiber
	f.mu.Lock()
	if l.phase != phaseActive {
		f.mu.Unlock()
		go fn()
		return func() bool { return false }
	}
	key := &fn
	if l.after == nil {
		l.after = map[*func()]struct{}{}
	}
	l.after[key] = struct{}{}
	f.mu.Unlock()
	return func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		if _, ok := l.after[key]; ok {
			delete(l.after, key)
			return true
		}
		return false
	}
}

// Err implements context.Context. It is nil while the fiber is active and a
// CONTEXT_INACTIVE error wrapping context.Canceled afterwards.
func (c *Context) Err() error {
	f := c.life.fiber
	f.mu.Lock()
	defer f.mu.Unlock()
	if c.life.phase == phaseActive {
		return nil
	}
	if c.life.err == nil {
		// Built on demand: most fibers are disposed without anyone asking.
		return canceled{c.life.fiber.inactive()}
	}
	return canceled{c.life.err}
}

// canceled makes errors.Is(err, context.Canceled) hold for an ended fiber
// while keeping the harness code.
type canceled struct{ err error }

func (c canceled) Error() string { return c.err.Error() }
func (c canceled) Unwrap() []error {
	return []error{c.err, stdctx.Canceled}
}

type ctxKey struct{}

// Value implements context.Context; values chain to the parent context.
func (c *Context) Value(key any) any {
	if key == (ctxKey{}) {
		return c
	}
	if c.parent != nil {
		return c.parent.Value(key)
	}
	return nil
}

// FromStd returns the dsh context inside a standard context derived from one.
func FromStd(ctx stdctx.Context) (*Context, bool) {
	if ctx == nil {
		return nil, false
	}
	c, ok := ctx.Value(ctxKey{}).(*Context)
	return c, ok
}

func pluginName(p Plugin) string {
	if n, ok := p.(Named); ok && n.Name() != "" {
		return n.Name()
	}
	return fmt.Sprintf("%T", p)
}
