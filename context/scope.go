package context

// Scopes own services, the way cordis isolates do: a service is registered in
// the scope of the fiber that provides it (the nearest Scoped fiber, or the
// root), and a lookup walks from the reader's scope outwards. So a preset
// mounted in an agent's scope provides what that agent's plugins see, while
// the root and other agents keep seeing theirs, and the same preset can be
// mounted for any number of agents.
//
// Everything below is guarded by tree.mu.

// scopeState is what a scope fiber (or the root) holds for the services rule.
type scopeState struct {
	services map[string]*slot
	// deps holds the plugin fibers created in this scope that inject a
	// service; a scope has few, so a list beats a map by key.
	deps []*Fiber
	// inner holds the scopes nested directly in this one, so a provider
	// reaches the dependents that resolve through it and no others.
	inner map[*Fiber]struct{}
}

// resolve returns the slot name resolves to from scope sc: the nearest one
// on the way out to the root. A slot provided by skip or by a fiber under it
// is passed over: a plugin that injects a key and provides it too binds to
// the outer provider instead of waiting for itself, and a child cannot
// shadow the parent it would be unloaded with.
func resolve(sc *Fiber, name string, skip *Fiber) *slot {
	for ; sc != nil; sc = sc.outer {
		if s := sc.table.services[name]; s != nil && (skip == nil || !under(s.provider, skip)) {
			return s
		}
	}
	return nil
}

// under reports whether f is a or sits below it.
func under(f, a *Fiber) bool {
	for ; f != nil; f = f.parent {
		if f == a {
			return true
		}
	}
	return false
}

// dependentsOf lists the fibers in sc and its nested scopes that inject name,
// appending to out.
func dependentsOf(sc *Fiber, name string, out []*Fiber) []*Fiber {
	for _, d := range sc.table.deps {
		if d.injects(name) {
			out = append(out, d)
		}
	}
	for in := range sc.table.inner {
		out = dependentsOf(in, name, out)
	}
	return out
}

// bind resolves every key f injects from f's scope and records the slots
// when all are active; it reports whether f can load.
func (t *tree) bind(f *Fiber) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(f.inject) == 0 {
		return true
	}
	if f.bound == nil {
		f.bound = make([]*slot, len(f.inject))
	}
	for i, k := range f.inject {
		s := resolve(f.scope, k, f)
		if s == nil || s.state != slotActive {
			clear(f.bound)
			return false
		}
		f.bound[i] = s
	}
	return true
}

// unbind forgets the slots f was applied with.
func (t *tree) unbind(f *Fiber) {
	if len(f.inject) == 0 {
		return
	}
	t.mu.Lock()
	clear(f.bound)
	t.mu.Unlock()
}

// boundTo reports whether f was applied with s. Called with tree.mu held.
func (f *Fiber) boundTo(s *slot) bool {
	for i, k := range f.inject {
		if k == s.name && i < len(f.bound) && f.bound[i] == s {
			return true
		}
	}
	return false
}

// shadowed reports whether name now resolves, from f's scope, to an active
// slot other than the one f was applied with: a provider closer to f arrived.
func (t *tree) shadowed(f *Fiber, name string) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	for i, k := range f.inject {
		if k != name || i >= len(f.bound) || f.bound[i] == nil {
			continue
		}
		if cur := resolve(f.scope, k, f); cur != nil && cur != f.bound[i] && cur.state == slotActive {
			return true
		}
	}
	return false
}
