package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// catchSIGPIPE keeps a reader that closes early (dsh run --json | head -1)
// from killing dsh: by default Go dies of SIGPIPE on a write to a closed
// stdout, before the turn is saved. Notify, rather than Ignore, because an
// ignored signal stays ignored in the child processes (bash and its pipes
// would then see EPIPE where they expect to stop quietly). The channel is
// never read: a full one drops the signal, which is all we want.
func catchSIGPIPE() (stop func()) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGPIPE)
	return func() { signal.Stop(c) }
}

// cutWriter is an output that a reader may close: after the first failed
// write it drops everything and answers success, so the printer carries on
// and the turn runs to its end and is recorded. Closed tells whether that
// happened, so that dsh can say so once on stderr.
type cutWriter struct {
	w io.Writer

	mu     sync.Mutex
	closed error
}

func newCutWriter(w io.Writer) *cutWriter { return &cutWriter{w: w} }

func (c *cutWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed != nil {
		return len(p), nil
	}
	if _, err := c.w.Write(p); err != nil {
		c.closed = err
	}
	return len(p), nil
}

// Closed is the write error that stopped the output, nil while it flows.
func (c *cutWriter) Closed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// Unwrap is the output underneath, for the terminal checks.
func (c *cutWriter) Unwrap() io.Writer { return c.w }

// reportCut says on diag that stdout stopped taking output, and why when it
// was not the usual closed pipe.
func reportCut(out *cutWriter, diag io.Writer, sessionID string) {
	err := out.Closed()
	if err == nil {
		return
	}
	why := ""
	if !errors.Is(err, syscall.EPIPE) {
		why = fmt.Sprintf(" (%v)", err)
	}
	fmt.Fprintf(diag, "dsh: stdout was closed%s; the rest of the output was dropped, the turn ran to its end and session %s holds all of it\n", why, sessionID)
}
