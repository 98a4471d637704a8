package agentcontroller

// InFlightChains reports how many agents have deliveries in flight.
func InFlightChains(c *Controller) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.chains)
}

// QueueLen reports how many deliveries to agentID are in flight.
func QueueLen(c *Controller, agentID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ch := c.chains[agentID]; ch != nil {
		return len(ch.queue)
	}
	return 0
}
