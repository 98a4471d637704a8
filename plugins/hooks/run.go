package hooks

import (
	"bytes"
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/internal/childproc"
)

// killGrace is how long a hook's process group has between SIGTERM and
// SIGKILL, and how long output held open by a process that left the
// group is waited for.
const killGrace = 2 * time.Second

// ran is how one hook process ended.
type ran struct {
	exit     int // -1 when it did not exit by itself
	stdout   string
	stderr   string
	timedOut bool
	signal   string // set when a signal killed it
	err      error  // it could not be started
}

// env is what a hook sees beyond the minimal environment.
type env struct {
	vars        map[string]string
	passthrough []string
}

// shell is the program hooks run under: bash as in Claude Code, sh where
// there is none.
var shell = func() string {
	for _, p := range []string{"/bin/bash", "/usr/bin/bash"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}()

// run runs command with input on stdin in dir, within timeout, through
// childproc: its own process group, killed as a whole when it ends, times
// out or ctx ends, so nothing a hook leaves in the background outlives it.
func run(ctx stdctx.Context, command string, input []byte, dir string, timeout time.Duration, e env, maxOut int) ran {
	p, err := childproc.New(childproc.Spec{Path: shell, Args: []string{"-c", command}, Dir: dir, Env: e.vars, Passthrough: e.passthrough})
	if err != nil {
		return ran{exit: -1, err: err}
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		p.Stop(0)
		return ran{exit: -1, err: err}
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		p.Stop(0)
		return ran{exit: -1, err: err}
	}
	defer outR.Close()
	defer errR.Close()
	// Files, not writers, for the output: Wait returns when the shell
	// exits even while a background process still holds them.
	p.Cmd.Stdout, p.Cmd.Stderr = outW, errW
	p.Cmd.Stdin = bytes.NewReader(input)
	// Stdin is copied by exec; a hook that never reads a large input, or a
	// process that left the group holding stdin, must not hold Wait.
	p.Cmd.WaitDelay = killGrace
	err = p.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		return ran{exit: -1, err: err}
	}
	stdout, stderr := newCapped(maxOut), newCapped(maxOut)
	copied := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(stdout, outR); copied <- struct{}{} }()
	go func() { _, _ = io.Copy(stderr, errR); copied <- struct{}{} }()
	exited := make(chan struct{})
	go func() {
		_ = p.Wait()
		close(exited)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	r := ran{exit: -1}
	select {
	case <-exited:
	case <-timer.C:
		r.timedOut = true
	case <-ctx.Done():
		r.err = stdctx.Cause(ctx)
	}
	p.Stop(killGrace)
	<-exited
	drain(copied, outR, errR)
	r.stdout, r.stderr = stdout.String(), stderr.String()
	if st := p.Cmd.ProcessState; st != nil && !r.timedOut && r.err == nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			r.signal = ws.Signal().String()
		} else {
			r.exit = st.ExitCode()
		}
	}
	return r
}

// drain waits for both output copies once the group is gone; a process
// that left the group (setsid) may hold a pipe open, so the wait is
// bounded: then the reads are cut short and the copies end.
func drain(copied <-chan struct{}, pipes ...*os.File) {
	t := time.NewTimer(killGrace)
	defer t.Stop()
	left := len(pipes)
	for ; left > 0; left-- {
		select {
		case <-copied:
			continue
		case <-t.C:
		}
		break
	}
	if left == 0 {
		return
	}
	for _, f := range pipes {
		if err := f.SetReadDeadline(time.Now()); err != nil && !errors.Is(err, os.ErrNoDeadline) {
			f.Close()
		}
	}
	for ; left > 0; left-- {
		<-copied
	}
}

// capped keeps the first max bytes written and counts the rest.
type capped struct {
	max  int
	buf  []byte
	lost int64
}

func newCapped(max int) *capped { return &capped{max: max} }

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - len(c.buf)
	if room >= len(p) {
		c.buf = append(c.buf, p...)
		return len(p), nil
	}
	if room > 0 {
		c.buf = append(c.buf, p[:room]...)
	}
	c.lost += int64(len(p) - max(room, 0))
	return len(p), nil
}

func (c *capped) String() string {
	s := string(bytes.ToValidUTF8(c.buf, []byte("\uFFFD")))
	if c.lost > 0 {
		s += fmt.Sprintf("\n[... %d more bytes not kept]", c.lost)
	}
	return s
}
