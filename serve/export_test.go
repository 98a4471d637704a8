package serve

import "time"

// SetTimings shortens the read timeout and the ping interval for a test
// and returns what restores them.
func SetTimings(read, ping time.Duration) (restore func()) {
	oldRead, oldPing := readTimeout, pingEvery
	readTimeout, pingEvery = read, ping
	return func() { readTimeout, pingEvery = oldRead, oldPing }
}
