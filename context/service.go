package context

import (
	"fmt"
	"reflect"

	"github.com/dsh-go/dsh/errs"
)

// ServiceKey is the untyped face of a Key, used to declare injections.
type ServiceKey interface {
	Name() string
}

// Key names a service of type T. Declare keys once, as package variables:
//
//	var Agents = context.NewKey[*Registry]("agents")
type Key[T any] struct{ name string }

// NewKey returns the key for the service called name.
func NewKey[T any](name string) Key[T] { return Key[T]{name: name} }

// Name returns the service name.
func (k Key[T]) Name() string { return k.name }

type slotState uint8

const (
	slotStaged      slotState = iota // provider still loading
	slotActive                       // readable, dependents may load
	slotWithdrawing                  // dependents unloading; still readable
)

type slot struct {
	name     string
	value    any
	provider *Fiber
	scope    *Fiber // the scope the service is registered in
	life     *life
	state    slotState
	// quiet marks a per-scope instance made by Own: it falls back to the
	// one around it, so dependents applied with that one need not be
	// applied again — and one may be made from inside such a dependent.
	quiet bool
}

// Provide mounts v as the service k in the scope of c — the nearest scope
// (Context.Scoped) around c, or the root — owned by c's fiber: it is
// withdrawn when that fiber is disposed or unloaded. Readers in that scope
// and the scopes nested in it see v; a provider in a nested scope shadows it
// there. A provider that is still loading makes the service visible once
// its Apply succeeded.
func (k Key[T]) Provide(c *Context, v T) error { return k.provide(c, v, false) }

func (k Key[T]) provide(c *Context, v T, quiet bool) error {
	if k.name == "" {
		return errs.New(errs.InvalidArgument, "Provide: the key has no name; build keys with NewKey")
	}
	if isNil(v) {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("Provide %q: the service is nil", k.name))
	}
	f := c.life.fiber
	t := f.tree
	s := &slot{name: k.name, value: v, provider: f, scope: f.home(), life: c.life, quiet: quiet}
	if f.State() == StateActive {
		s.state = slotActive
	}
	t.mu.Lock()
	tab := s.scope.tab()
	if old := tab.services[k.name]; old != nil {
		t.mu.Unlock()
		return errs.New(errs.ServiceConflict, fmt.Sprintf(
			"service %q is already provided in %s by fiber %q; fiber %q cannot provide it there too: dispose the first provider, provide it in another scope, or use another key",
			k.name, s.scope.scopeName(), old.provider.name, f.name))
	}
	if tab.services == nil {
		tab.services = map[string]*slot{}
	}
	tab.services[k.name] = s
	t.mu.Unlock()

	_, err := c.OnDispose("service "+k.name, func() error {
		t.withdraw(s)
		return nil
	})
	if err != nil {
		t.mu.Lock()
		if tab.services[k.name] == s {
			delete(tab.services, k.name)
		}
		t.mu.Unlock()
		return err
	}
	if s.state == slotActive {
		t.wake(s)
	}
	return nil
}

// withdraw unloads the dependents that were applied with s while it is
// still readable, then removes it; dependents that now resolve to a provider
// further out are applied again against that one.
func (t *tree) withdraw(s *slot) {
	t.mu.Lock()
	tab := s.scope.tab()
	if tab.services[s.name] != s {
		t.mu.Unlock()
		return
	}
	s.state = slotWithdrawing
	var deps []*Fiber
	for _, d := range dependentsOf(s.scope, s.name, nil) {
		if d != s.provider && d.boundTo(s) {
			deps = append(deps, d)
		}
	}
	t.mu.Unlock()

	if len(deps) > 0 {
		why := errs.New(errs.ContextInactive, fmt.Sprintf("service %q was withdrawn by fiber %q", s.name, s.provider.name))
		for _, d := range deps {
			d.unload(why)
		}
	}

	t.mu.Lock()
	if tab.services[s.name] == s {
		delete(tab.services, s.name)
	}
	t.mu.Unlock()
	t.wake(s)
}

// Get returns the service k as seen from c: the provider in c's scope, or
// the nearest one in the scopes around it. It fails when c is no longer
// active, when the plugin that owns c did not inject k, and when k has no
// active provider. Code outside any plugin — the root, and a scope's own
// context such as an agent's — may read every service.
func (k Key[T]) Get(c *Context) (T, error) {
	var zero T
	if c == nil {
		return zero, errs.New(errs.InvalidArgument, fmt.Sprintf("Get %q: the context is nil", k.name))
	}
	f := c.life.fiber
	f.mu.Lock()
	ph := c.life.phase
	f.mu.Unlock()
	if ph == phaseEnded {
		return zero, f.inactive()
	}
	t := f.tree
	t.mu.RLock()
	s := resolve(f.home(), k.name, nil)
	t.mu.RUnlock()
	if owner := pluginFiber(f); owner != nil && !owner.injects(k.name) && (s == nil || pluginFiber(s.provider) != owner) {
		return zero, notInjected(owner, k.name)
	}
	if s == nil || s.state == slotStaged {
		return zero, errs.New(errs.ServiceUnavailable, fmt.Sprintf(
			"service %q has no active provider in %s or the scopes around it: apply the plugin that provides it first, at the root or in this scope",
			k.name, f.home().scopeName()))
	}
	return s.value.(T), nil
}

// notInjected tells the plugin's author exactly where the key goes.
func notInjected(owner *Fiber, key string) error {
	how := fmt.Sprintf("return the key of %q from the plugin's Inject method", key)
	if _, ok := owner.plugin.(defined); ok {
		how = fmt.Sprintf("add the key of %q to the inject arguments after apply where %q is defined (Define or plugin.Register)", key, owner.name)
	}
	return errs.New(errs.ServiceNotInjected, fmt.Sprintf(
		"plugin %q reads service %q but does not inject it: %s", owner.name, key, how)).WithReason("context/not-injected")
}

// scopeName is how errors name a scope.
func (f *Fiber) scopeName() string {
	if f.parentCtx == nil {
		return "the root scope"
	}
	return fmt.Sprintf("scope %q", f.tag)
}

// pluginFiber returns the nearest fiber at or above f that runs a plugin, or
// nil when a scope or the root comes first. A scope is a place, not a
// plugin: code reading through an agent's context did not write the plugin
// that made the scope, so it is not held to that plugin's inject list.
func pluginFiber(f *Fiber) *Fiber {
	for ; f != nil; f = f.Parent() {
		if f.plugin != nil {
			return f
		}
		if f.isScope {
			return nil
		}
	}
	return nil
}

func (f *Fiber) injects(name string) bool {
	for _, k := range f.inject {
		if k == name {
			return true
		}
	}
	return false
}

func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}
