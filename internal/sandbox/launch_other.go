//go:build !linux

package sandbox

import (
	"net"
	"os/exec"

	"github.com/dsh-go/dsh/errs"
)

// Entry follows one child into the sandbox; outside Linux there is none.
type Entry struct{}

// Attach refuses outside Linux: the sandbox is built of Linux features.
func Attach(cmd *exec.Cmd, r Rules, st Status) (*Entry, error) {
	if err := st.Check(r); err != nil {
		return nil, err
	}
	return nil, errs.New(Unavailable, "the sandbox runs on Linux only").WithReason("sandbox/no-landlock")
}

// Started does nothing outside Linux.
func (e *Entry) Started() {}

// Listener is nil outside Linux.
func (e *Entry) Listener() (net.Listener, error) { return nil, nil }

// Err is nil outside Linux.
func (e *Entry) Err() error { return nil }
