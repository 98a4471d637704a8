package cluster

import "time"

// SetWaitSlice shortens the slice of a forwarded wait for a test; the
// function it returns restores it.
func SetWaitSlice(d time.Duration) func() {
	old := waitSlice
	waitSlice = d
	return func() { waitSlice = old }
}
