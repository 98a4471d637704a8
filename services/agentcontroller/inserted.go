package agentcontroller

import stdctx "context"

// emitQueue orders one agent's inserted events. They are emitted outside
// the agent's chain, so a listener that delivers to the same agent does not
// wait for itself; one goroutine at a time emits them, in insertion order.
type emitQueue struct {
	pending  []Inserted
	draining bool
}

// emitInserted emits the agent's queued inserted events, unless another
// goroutine already does: that one emits the events queued meanwhile,
// including those of deliveries its own listeners made.
func (c *Controller) emitInserted(agentID string) {
	c.mu.Lock()
	q := c.emitting[agentID]
	if q == nil || q.draining {
		c.mu.Unlock()
		return
	}
	q.draining = true
	for len(q.pending) > 0 {
		in := q.pending[0]
		q.pending[0] = Inserted{}
		q.pending = q.pending[1:]
		c.mu.Unlock()
		EventInserted.Emit(stdctx.Background(), in.Agent.Context(), in)
		c.mu.Lock()
	}
	delete(c.emitting, agentID)
	c.mu.Unlock()
}
