package context

import "github.com/dsh-go/dsh/errs"

// Local returns the service k provided in c's scope itself — not one from a
// scope around it — and whether there is one that is active.
func (k Key[T]) Local(c *Context) (T, bool) {
	var zero T
	sc := c.life.fiber.home()
	t := sc.tree
	t.mu.RLock()
	var s *slot
	if sc.table != nil {
		s = sc.table.services[k.name]
	}
	t.mu.RUnlock()
	if s == nil || s.state == slotStaged {
		return zero, false
	}
	return s.value.(T), true
}

// Own returns the service k provided in c's scope itself, building one with
// make and providing it through the scope's own context when there is none,
// so it lives as long as the scope. Services that keep something per agent
// (tools, prompt sections, model providers) use it to hold each agent's
// share in the agent's scope instead of in a map keyed by agent.
func (k Key[T]) Own(c *Context, make func() T) (T, error) {
	for {
		if v, ok := k.Local(c); ok {
			return v, nil
		}
		sc := c.Scope()
		if sc == nil {
			var zero T
			return zero, c.life.fiber.home().inactive()
		}
		v := make()
		err := k.provide(sc, v, true)
		if err == nil {
			return v, nil
		}
		if !errs.HasCode(err, errs.ServiceConflict) {
			var zero T
			return zero, err
		}
		// Another caller provided one in this scope meanwhile: use it.
	}
}

// Find returns the service k as seen from c, like Get, and whether there is
// an active one, without making an error when there is none: for a hot
// path where the service is optional (the tools service's gate, asked on
// every call, provided only while some plugin wants one).
func (k Key[T]) Find(c *Context) (T, bool) {
	var zero T
	if c == nil {
		return zero, false
	}
	f := c.life.fiber
	f.mu.Lock()
	ph := c.life.phase
	f.mu.Unlock()
	if ph == phaseEnded {
		return zero, false
	}
	t := f.tree
	t.mu.RLock()
	s := resolve(f.home(), k.name, nil)
	t.mu.RUnlock()
	if s == nil || s.state == slotStaged {
		return zero, false
	}
	if owner := pluginFiber(f); owner != nil && !owner.injects(k.name) && pluginFiber(s.provider) != owner {
		return zero, false
	}
	return s.value.(T), true
}
