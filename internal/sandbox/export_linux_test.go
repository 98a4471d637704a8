package sandbox

import "sync"

// SetLauncher makes path the executable a sandboxed command enters
// through (dsh's own by default), for measuring another build's start.
func SetLauncher(path string) (restore func()) {
	old := self
	self = path
	return func() { self = old }
}

// SetJournalDir moves the placeholder journals to dir and lets the next
// placeholder sweep again.
func SetJournalDir(dir string) (restore func()) {
	old := journalDir
	journalDir = dir
	sweepOnce = sync.Once{}
	return func() { journalDir = old }
}
