package context

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/dsh-go/dsh/errs"
	"github.com/hashicorp/go-hclog"
)

// tree is the state shared by every context of one root: the lock over the
// scopes' service tables, the fiber watchers and tree-local slots.
type tree struct {
	logger hclog.Logger
	root   *Fiber

	// mu guards every scope's table and every fiber's bound slots.
	mu sync.RWMutex

	watchers atomic.Pointer[[]*watcher]

	localsMu sync.Mutex
	locals   atomic.Pointer[[]any]
}

func newTree() *tree { return &tree{} }

// track records f as a dependent in its scope.
func (t *tree) track(f *Fiber) {
	if len(f.inject) == 0 {
		return
	}
	t.mu.Lock()
	home := f.home()
	tab := home.tab()
	tab.deps = append(tab.deps, f)
	t.link(home)
	t.mu.Unlock()
}

// forget removes a disposed fiber from its scope's dependents.
func (t *tree) forget(f *Fiber) {
	if len(f.inject) == 0 {
		return
	}
	t.mu.Lock()
	sc := f.home().tab()
	// Fibers mostly go in reverse order of creation: search from the end.
	for i := len(sc.deps) - 1; i >= 0; i-- {
		if sc.deps[i] == f {
			sc.deps = slices.Delete(sc.deps, i, i+1)
			break
		}
	}
	if f.table != nil {
		f.table.bound = nil
	}
	t.mu.Unlock()
}

// wake tells the dependents that resolve through s's scope that s is active
// or gone: pending ones are applied if they can be now, and active ones
// that a closer provider now shadows are applied again against it.
func (t *tree) wake(s *slot) {
	t.mu.RLock()
	deps := dependentsOf(s.scope, s.name, nil)
	t.mu.RUnlock()
	for _, d := range deps {
		// Skipping fibers that are loading avoids waiting on the tmu of a
		// fiber that is busy — possibly the caller's own ancestor.
		switch d.State() {
		case StatePending:
			d.load()
		case StateActive:
			if !s.quiet && t.shadowed(d, s.name) {
				d.unload(errs.New(errs.ContextInactive, fmt.Sprintf(
					"service %q is now provided closer to fiber %q, by fiber %q", s.name, d.name, s.provider.name)))
				d.load()
			}
		}
	}
}

// activate publishes the services an activation staged while it was loading.
func (t *tree) activate(l *life) {
	// A fiber provides into its own scope only, so that is the one table
	// to look through.
	home := l.fiber.home()
	var woke []*slot
	t.mu.Lock()
	if home.table != nil {
		for _, s := range home.table.services {
			if s.life == l && s.state == slotStaged {
				s.state = slotActive
				woke = append(woke, s)
			}
		}
	}
	t.mu.Unlock()
	for _, s := range woke {
		t.wake(s)
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
