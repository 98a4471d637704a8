package agentcontroller

// Waiting reports how many deliveries to agentID wait behind the one being
// decided, not counting those whose senders gave up. A UI shows it as
// "queued"; a test waits on it to know a delivery reached the chain.
func (c *Controller) Waiting(agentID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.chains[agentID]
	if ch == nil {
		return 0
	}
	n := 0
	for _, d := range ch.queue[1:] {
		if !d.abandoned {
			n++
		}
	}
	return n
}
