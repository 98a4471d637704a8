//go:build unix

package testkit

import (
	"syscall"
	"time"
)

// CPUTime is the process's CPU time so far, user and system, for a
// benchmark that reports CPU per operation beside wall time: on a shared
// machine it varies far less than the wall clock.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
