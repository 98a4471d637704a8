package context

import (
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
)

// tree is the state shared by every context of one root: the service table,
// who waits for which service, the fiber watchers and tree-local slots.
type tree struct {
	logger hclog.Logger
	root   *Fiber

	mu         sync.RWMutex
	services   map[string]*slot
	dependents map[string][]*Fiber

	watchers atomic.Pointer[[]*watcher]

	localsMu sync.Mutex
	locals   atomic.Pointer[[]any]
}

func newTree() *tree {
	return &tree{services: map[string]*slot{}, dependents: map[string][]*Fiber{}}
}

// track records f as a dependent of every key it injects.
func (t *tree) track(f *Fiber) {
	if len(f.inject) == 0 {
		return
	}
	t.mu.Lock()
	for _, k := range f.inject {
		t.dependents[k] = append(t.dependents[k], f)
	}
	t.mu.Unlock()
}

// forget removes a disposed fiber from the dependents table.
func (t *tree) forget(f *Fiber) {
	if len(f.inject) == 0 {
		return
	}
	t.mu.Lock()
	for _, k := range f.inject {
		deps := t.dependents[k]
		for i, d := range deps {
			if d == f {
				deps = append(deps[:i], deps[i+1:]...)
				break
			}
		}
		if len(deps) == 0 {
			delete(t.dependents, k)
		} else {
			t.dependents[k] = deps
		}
	}
	t.mu.Unlock()
}

// ready reports whether every key f injects has an active provider.
func (t *tree) ready(f *Fiber) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for _, k := range f.inject {
		s := t.services[k]
		if s == nil || s.state != slotActive {
			return false
		}
	}
	return true
}

// wake applies the pending dependents of key.
func (t *tree) wake(key string) {
	t.mu.RLock()
	deps := append([]*Fiber(nil), t.dependents[key]...)
	t.mu.RUnlock()
	for _, d := range deps {
		// Skipping fibers that are not pending avoids waiting on the tmu of
		// a fiber that is busy loading — possibly the caller's own ancestor.
		if d.State() == StatePending {
			d.load()
		}
	}
}

// activate publishes the services an activation staged while it was loading.
func (t *tree) activate(l *life) {
	var woke []string
	t.mu.Lock()
	for name, s := range t.services {
		if s.life == l && s.state == slotStaged {
			s.state = slotActive
			woke = append(woke, name)
		}
	}
	t.mu.Unlock()
	for _, name := range woke {
		t.wake(name)
	}
}

// FiberChange describes one state transition of a fiber.
type FiberChange struct {
	Fiber    *Fiber
	From, To State
	// Err is the apply error when To is StateFailed.
	Err error
}

type watcher struct{ fn func(FiberChange) }

// WatchFibers calls fn on every state change of every fiber in the tree, from
// the goroutine that made the change. The watch belongs to c's fiber.
func (c *Context) WatchFibers(fn func(FiberChange)) (off func(), err error) {
	t := c.life.fiber.tree
	w := &watcher{fn: fn}
	return c.Effect("fiber watch", func() (Disposer, error) {
		t.updateWatchers(func(ws []*watcher) []*watcher { return append(ws, w) })
		return func() error {
			t.updateWatchers(func(ws []*watcher) []*watcher {
				out := make([]*watcher, 0, len(ws))
				for _, x := range ws {
					if x != w {
						out = append(out, x)
					}
				}
				return out
			})
			return nil
		}, nil
	})
}

func (t *tree) updateWatchers(edit func([]*watcher) []*watcher) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var cur []*watcher
	if p := t.watchers.Load(); p != nil {
		cur = *p
	}
	next := edit(append([]*watcher(nil), cur...))
	t.watchers.Store(&next)
}

func (t *tree) notify(ch FiberChange) {
	p := t.watchers.Load()
	if p == nil {
		return
	}
	for _, w := range *p {
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.logger.Error("fiber watcher panicked", "fiber", ch.Fiber.name, "panic", r)
				}
			}()
			w.fn(ch)
		}()
	}
}
