package agentcontroller

// InFlightChains reports how many agents have deliveries in flight.
func InFlightChains(c *Controller) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.chains)
}
