package sandbox

// SetLauncher makes path the executable a sandboxed command enters
// through (dsh's own by default), for measuring another build's start.
func SetLauncher(path string) (restore func()) {
	old := self
	self = path
	return func() { self = old }
}
