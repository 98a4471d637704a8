package context

import "sync/atomic"

var localIDs atomic.Int32

// Local is a slot that holds one value per tree, made on first use. Packages
// that keep tree-wide state, such as the event bus, hang it here instead of in
// a process-wide variable, so two trees in one process never share it.
type Local[T any] struct {
	id   int
	make func() *T
}

// NewLocal declares a slot; make builds the value for a tree on first use.
// Declare slots as package variables.
func NewLocal[T any](make func() *T) *Local[T] {
	return &Local[T]{id: int(localIDs.Add(1)) - 1, make: make}
}

// Get returns the tree's value for the slot. It never allocates once the
// value exists.
func (l *Local[T]) Get(c *Context) *T {
	t := c.life.fiber.tree
	if p := t.locals.Load(); p != nil && l.id < len(*p) {
		if v := (*p)[l.id]; v != nil {
			return v.(*T)
		}
	}
	t.localsMu.Lock()
	defer t.localsMu.Unlock()
	var cur []any
	if p := t.locals.Load(); p != nil {
		cur = *p
	}
	if l.id < len(cur) && cur[l.id] != nil {
		return cur[l.id].(*T)
	}
	next := make([]any, max(len(cur), l.id+1))
	copy(next, cur)
	v := l.make()
	next[l.id] = v
	t.locals.Store(&next)
	return v
}
