package agentcontroller

// InFlightChains reports how many agents have deliveries in flight, to
// check that an idle agent leaves no entry behind.
func InFlightChains(c *Controller) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.chains) + len(c.emitting)
}
