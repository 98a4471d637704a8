// Package faults is dsh's fault-injection suite: it kills plugin binaries
// under load, kills `dsh` itself mid-stream and mid-tool and resumes, runs
// two processes on one session, points dsh at a model server that fails in
// every way it can, starts plugins that hang in each start phase and at
// shutdown, and makes session writes fail. Each fault asserts that nothing
// is lost, nothing is doubled and nothing hangs, and the suite prints a
// table per fault: tries, outcomes (kept / refused with reason / lost /
// doubled) and the time to recover.
//
// The package holds only tests (and the misbehaving plugin binary under
// internal/faultplugin). CI runs the short default with `go test -race
// ./...`; DSH_FAULTS_N=k multiplies the tries for a long run:
//
//	DSH_FAULTS_N=10 go test -count=1 -v -run . ./internal/faults/
package faults
