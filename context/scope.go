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
	// inner holds the scopes nested directly in this one that hold
	// dependents, or scopes that do, so a provider reaches the dependents
	// that resolve through it and no others. Scopes without any (most idle
	// agents) are not listed and cost their outer scope nothing.
	inner map[*Fiber]struct{}
	// linked is set while this scope is in its outer scope's inner.
	linked bool

	// bound holds, for a plugin fiber, the slot per injected key its
	// current activation was applied with.
	bound []*slot
}

// home returns the scope f registers services in and reads them from: f
// itself for a scope or the root, else the nearest scope above it. Plugins
// nest a level or two deep, so the walk is short.
func (f *Fiber) home() *Fiber {
	for !f.isScope {
		f = f.parentCtx.life.fiber
	}
	return f
}

// outer returns the scope around scope f; nil for the root.
func (f *Fiber) outer() *Fiber {
	if f.parentCtx == nil {
		return nil
	}
	return f.parentCtx.life.fiber.home()
}

// tab returns f's table, making it: a scope's services and dependents, or a
// plugin's bound slots. Called with tree.mu held.
func (f *Fiber) tab() *scopeState {
	if f.table == nil {
		f.table = &scopeState{}
	}
	return f.table
}

// link lists sc, and the scopes around it, in their outer scopes' inner
// sets. Called with tree.mu held.
func (t *tree) link(sc *Fiber) {
	for out := sc.outer(); out != nil && !sc.tab().linked; out = sc.outer() {
		o := out.tab()
		if o.inner == nil {
			o.inner = map[*Fiber]struct{}{}
		}
		o.inner[sc] = struct{}{}
		sc.table.linked = true
		sc = out
	}
}

// unlink takes a disposed scope out of its outer scope's inner set.
func (t *tree) unlink(f *Fiber) {
	if !f.isScope || f.parentCtx == nil {
		return
	}
	t.mu.Lock()
	if f.table != nil && f.table.linked {
		delete(f.outer().table.inner, f)
		f.table.linked = false
	}
	t.mu.Unlock()
}

// resolve returns the slot name resolves to from scope sc: the nearest one
// on the way out to the root. A slot provided by skip or by a fiber under it
// is passed over: a plugin that injects a key and provides it too binds to
// the outer provider instead of waiting for itself, and a child cannot
// shadow the parent it would be unloaded with.
func resolve(sc *Fiber, name string, skip *Fiber) *slot {
	for ; sc != nil; sc = sc.outer() {
		if sc.table == nil {
			continue
		}
		if s := sc.table.services[name]; s != nil && (skip == nil || !under(s.provider, skip)) {
			return s
		}
	}
	return nil
}

// under reports whether f is a or sits below it.
func under(f, a *Fiber) bool {
	for ; f != nil; f = f.Parent() {
		if f == a {
			return true
		}
	}
	return false
}

// dependentsOf lists the fibers in sc and its nested scopes that inject name,
// appending to out.
func dependentsOf(sc *Fiber, name string, out []*Fiber) []*Fiber {
	if sc.table == nil {
		return out
	}
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
	tab := f.tab()
	if tab.bound == nil {
		tab.bound = make([]*slot, len(f.inject))
	}
	home := f.home()
	for i, k := range f.inject {
		s := resolve(home, k, f)
		if s == nil || s.state != slotActive {
			clear(tab.bound)
			return false
		}
		tab.bound[i] = s
	}
	return true
}

// unbind forgets the slots f was applied with.
func (t *tree) unbind(f *Fiber) {
	if len(f.inject) == 0 {
		return
	}
	t.mu.Lock()
	if f.table != nil {
		clear(f.table.bound)
	}
	t.mu.Unlock()
}

// boundTo reports whether f was applied with s. Called with tree.mu held.
func (f *Fiber) boundTo(s *slot) bool {
	if f.table == nil || f.table.bound == nil {
		return false
	}
	for i, k := range f.inject {
		if k == s.name && f.table.bound[i] == s {
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
	if f.table == nil || f.table.bound == nil {
		return false
	}
	home := f.home()
	for i, k := range f.inject {
		was := f.table.bound[i]
		if k != name || was == nil {
			continue
		}
		if cur := resolve(home, k, f); cur != nil && cur != was && cur.state == slotActive {
			return true
		}
	}
	return false
}
