package cluster

import "time"

// SetWaitSlice shortens the slice of a forwarded wait for a test; the
// function it returns restores it.
func SetWaitSlice(d time.Duration) func() {
	old := waitSlice
	waitSlice = d
	return func() { waitSlice = old }
}

// Relays counts the approval relays h serves for clients on other hosts.
func (h *Host) Relays() int {
	h.relays.mu.Lock()
	defer h.relays.mu.Unlock()
	return len(h.relays.m)
}
