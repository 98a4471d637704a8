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
	value    any
	provider *Fiber
	life     *life
	state    slotState
}

// Provide mounts v as the service k, owned by c's fiber: it is withdrawn when
// that fiber is disposed or unloaded. A provider that is still loading makes
// the service visible once its Apply succeeded.
func (k Key[T]) Provide(c *Context, v T) error {
	if k.name == "" {
		return errs.New(errs.InvalidArgument, "Provide: the key has no name; build keys with NewKey")
	}
	if isNil(v) {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("Provide %q: the service is nil", k.name))
	}
	f := c.life.fiber
	t := f.tree
	s := &slot{value: v, provider: f, life: c.life}
	if f.State() == StateActive {
		s.state = slotActive
	}
	t.mu.Lock()
	if old := t.services[k.name]; old != nil {
		t.mu.Unlock()
		return errs.New(errs.ServiceConflict, fmt.Sprintf(
			"service %q is already provided by fiber %q; fiber %q cannot provide it too: dispose the first provider or use another key",
			k.name, old.provider.name, f.name))
	}
	t.services[k.name] = s
	t.mu.Unlock()

	_, err := c.OnDispose("service "+k.name, func() error {
		t.withdraw(k.name, s)
		return nil
	})
	if err != nil {
		t.mu.Lock()
		delete(t.services, k.name)
		t.mu.Unlock()
		return err
	}
	if s.state == slotActive {
		t.wake(k.name)
	}
	return nil
}

// withdraw unloads the dependents of a service while it is still readable,
// then removes it.
func (t *tree) withdraw(name string, s *slot) {
	t.mu.Lock()
	if t.services[name] != s {
		t.mu.Unlock()
		return
	}
	s.state = slotWithdrawing
	deps := append([]*Fiber(nil), t.dependents[name]...)
	t.mu.Unlock()

	why := errs.New(errs.ContextInactive, fmt.Sprintf("service %q was withdrawn by fiber %q", name, s.provider.name))
	for _, d := range deps {
		if d != s.provider {
			d.unload(why)
		}
	}

	t.mu.Lock()
	if t.services[name] == s {
		delete(t.services, name)
	}
	t.mu.Unlock()
}

// Get returns the service k as seen from c. It fails when c is no longer
// active, when the plugin that owns c did not inject k, and when k has no
// active provider. Code outside any plugin (the root and its scopes) may read
// every service.
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
	s := t.services[k.name]
	t.mu.RUnlock()
	if owner := pluginFiber(f); owner != nil && !owner.injects(k.name) && (s == nil || pluginFiber(s.provider) != owner) {
		return zero, errs.New(errs.ServiceNotInjected, fmt.Sprintf(
			"plugin %q reads service %q but does not inject it: list the key in the plugin's Inject method", owner.name, k.name))
	}
	if s == nil || s.state == slotStaged {
		return zero, errs.New(errs.ServiceUnavailable, fmt.Sprintf(
			"service %q has no active provider: apply the plugin that provides it first", k.name))
	}
	return s.value.(T), nil
}

// pluginFiber returns the nearest fiber at or above f that runs a plugin, or
// nil when f sits in the root's own scopes.
func pluginFiber(f *Fiber) *Fiber {
	for ; f != nil; f = f.parent {
		if f.plugin != nil {
			return f
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
