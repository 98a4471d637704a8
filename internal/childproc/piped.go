package childproc

import (
	"fmt"
	"io"
	"os"
	"time"
)

// StartPiped starts a long-lived child that speaks over its stdin and
// stdout (a language server, an MCP server) and reaps it in the
// background: Done closes when it exits. Its stderr goes to stderr, and
// waitDelay bounds the copy of it once the child is gone (a process that
// escaped the group may hold it open).
//
// The pipes are plain ones, not the Cmd's: the reaper may run as soon as
// the child exits — which is how a crash is seen — without closing the
// ends a reader still holds. On failure nothing is left open.
func (p *Proc) StartPiped(stderr io.Writer, waitDelay time.Duration) (stdin io.WriteCloser, stdout io.ReadCloser, err error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		p.Stop(0)
		return nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		p.Stop(0)
		return nil, nil, err
	}
	p.Cmd.Stdin, p.Cmd.Stdout, p.Cmd.Stderr = inR, outW, stderr
	p.Cmd.WaitDelay = waitDelay
	err = p.Start()
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		return nil, nil, fmt.Errorf("starting %s: %w", p.Cmd.Path, err)
	}
	go func() { _ = p.Wait() }()
	return inW, outR, nil
}
