package agentcontroller

import stdctx "context"

// emitQueue orders one agent's inserted events. They are emitted outside
// the agent's chain, so a listener that delivers to the same agent does not
// wait for itself. An entry exists while one goroutine emits the agent's
// events; pending holds those inserted meanwhile, including by deliveries
// its own listeners made. Kept by value in the map, an uncontended
// insertion costs no allocation.
type emitQueue struct {
	pending []Inserted
}

// emitInserted emits in, then every event queued behind it, and ends the
// agent's entry once none is left.
func (c *Controller) emitInserted(in Inserted) {
	id := in.Agent.ID()
	for {
		EventInserted.Emit(stdctx.Background(), in.Agent.Context(), in)
		c.mu.Lock()
		q := c.emitting[id]
		if len(q.pending) == 0 {
			delete(c.emitting, id)
			c.mu.Unlock()
			return
		}
		in = q.pending[0]
		q.pending[0] = Inserted{}
		q.pending = q.pending[1:]
		c.emitting[id] = q
		c.mu.Unlock()
	}
}
