package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// HostFDEnv names the variable that gives a child the number of the file
// descriptor that reads end-of-file once dsh is gone (see the package doc).
const HostFDEnv = "DSH_HOST_FD"

// hostFD is that descriptor in the child: the first of cmd.ExtraFiles.
const hostFD = 3

// Spec says what to run and with what environment.
type Spec struct {
	Path string
	Args []string
	// Dir is the working directory ("" means dsh's).
	Dir string
	// Env is set on top of the base environment and wins.
	Env map[string]string
	// Passthrough names variables of dsh's environment the child may see.
	Passthrough []string
	// Environ is dsh's environment to copy from; nil means os.Environ().
	Environ []string
}

// Proc is one child process and its group.
type Proc struct {
	// Cmd is ready to start, by Start or by whoever runs it (go-plugin).
	// Add to Cmd.Env rather than replace it.
	Cmd *exec.Cmd
	// hostEnd is the write end of the host pipe; closing it tells the
	// child's group that dsh is gone.
	hostEnd, childEnd *os.File
	done              chan struct{} // closed when Start's Wait returned
	waitErr           error
}

// New prepares the child of spec.
func New(spec Spec) (*Proc, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Dir = spec.Dir
	cmd.Env = Environ(spec.Environ, spec.Passthrough, spec.Env)
	cmd.SysProcAttr = sysProcAttr()
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("childproc: the host pipe for %s: %w", spec.Path, err)
	}
	cmd.ExtraFiles = []*os.File{r}
	cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", HostFDEnv, hostFD))
	return &Proc{Cmd: cmd, hostEnd: w, childEnd: r}, nil
}

// Started is called once the child runs (or failed to start): dsh's copy of
// the child's end of the host pipe is not needed any more.
func (p *Proc) Started() { p.childEnd.Close() }

// Start starts the child and reaps it in the background; Done closes when
// it exited. waitDelay bounds how long Wait copies its output after the
// child exited, in case something outside the group holds the pipes.
func (p *Proc) Start(waitDelay time.Duration) error {
	p.Cmd.WaitDelay = waitDelay
	err := p.Cmd.Start()
	p.Started()
	if err != nil {
		p.hostEnd.Close()
		return err
	}
	p.done = make(chan struct{})
	go func() {
		p.waitErr = p.Cmd.Wait()
		close(p.done)
	}()
	return nil
}

// Done is closed when a child started by Start exited; Err then says how.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the child's exit error once Done is closed.
func (p *Proc) Err() error { return p.waitErr }

// Pid is the child's process id, which is also its group's id; 0 before
// it started.
func (p *Proc) Pid() int {
	if p.Cmd.Process == nil {
		return 0
	}
	return p.Cmd.Process.Pid
}

// Signal sends sig to the child's whole group. A group that is gone
// already is not an error.
func (p *Proc) Signal(sig syscall.Signal) error {
	pid := p.Pid()
	if pid <= 0 {
		return nil
	}
	if err := signalGroup(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// Stop tears the group down within about twice grace: SIGTERM to the
// group, up to grace for exited to close, SIGKILL to the group, then up to
// grace again. exited is the signal that the child is gone (Done when
// Start ran it). The group is killed even when the child exited at once, so
// nothing it started outlives it. Stop reports whether exited closed.
func (p *Proc) Stop(exited <-chan struct{}, grace time.Duration) bool {
	defer p.hostEnd.Close()
	if p.Pid() == 0 {
		return true
	}
	if exited == nil {
		exited = p.done
	}
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
	}
	_ = p.Signal(syscall.SIGKILL)
	select {
	case <-exited:
		return true
	default:
	}
	t.Reset(grace)
	select {
	case <-exited:
		return true
	case <-t.C:
		return false
	}
}

// Kill sends SIGKILL to the group at once, for a start that is abandoned.
func (p *Proc) Kill() { _ = p.Signal(syscall.SIGKILL) }

// CloseHostEnd tells the child's group that dsh is gone, as dsh's death
// would. Stop does it last; tests call it alone.
func (p *Proc) CloseHostEnd() { p.hostEnd.Close() }
