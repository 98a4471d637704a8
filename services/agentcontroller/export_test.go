package agentcontroller

// InFlightChains reports how many agents have deliveries in flight, to
// check that an idle agent leaves no entry behind.
func InFlightChains(c *Controller) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.chains) + len(c.emitting)
}

// HoldWaiting reports how many deliveries wait for a hold's release.
func HoldWaiting(c *Controller) int {
	return c.gate.Waiting()
}

// Holding reports whether a hold is in place.
func Holding(c *Controller) bool {
	return c.gate.Held()
}
