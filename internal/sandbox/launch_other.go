//go:build !linux

package sandbox

import (
	"os/exec"

	"github.com/dsh-go/dsh/errs"
)

// Entry follows one child into the sandbox; outside Linux there is none.
type Entry struct{}

// Attach refuses outside Linux: Landlock is a Linux feature.
func Attach(cmd *exec.Cmd, r Rules, st Status) (*Entry, error) {
	if err := st.Check(r); err != nil {
		return nil, err
	}
	return nil, errs.New(Unavailable, "the Landlock sandbox runs on Linux only").WithReason("sandbox/no-landlock")
}

// Started does nothing outside Linux.
func (e *Entry) Started() {}

// Err is nil outside Linux.
func (e *Entry) Err() error { return nil }
