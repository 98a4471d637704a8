package hooks

import "time"

// SetMaxSessionEnd sets how long a disposal waits for SessionEnd hooks,
// for a test that cannot wait the real 30 s; it returns the restore.
func SetMaxSessionEnd(d time.Duration) func() {
	old := maxSessionEnd
	maxSessionEnd = d
	return func() { maxSessionEnd = old }
}
