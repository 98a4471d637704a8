package childproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
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
	// Guard starts a watcher in the child's group that kills the group
	// once dsh is gone, for a child that may not watch the host pipe
	// itself (an MCP server behind npx). It costs a /bin/sh per start, so
	// long-lived children take it; short ones (a hook, a bash command)
	// are torn down by Stop within their timeout.
	Guard bool
}

// Proc is one child process and its group.
type Proc struct {
	// Cmd is ready to start. Add to Cmd.Env rather than replace it; set
	// Cmd.WaitDelay when Cmd copies output to a writer that is not a file,
	// so Wait is bounded even if something outside the group holds it.
	Cmd *exec.Cmd
	// hostEnd is the write end of the host pipe; closing it tells the
	// child's group that dsh is gone. childEnd is dsh's copy of the read
	// end, closed once the child has its own.
	hostEnd, childEnd *os.File
	pid               atomic.Int64
	done              chan struct{} // closed when Wait returned
	// stopped is set by the first Stop: once the group is gone its id may
	// be reused, and a second Stop must not signal a stranger.
	stopped atomic.Bool
	waitErr error
	guard   bool
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
	return &Proc{Cmd: cmd, hostEnd: w, childEnd: r, done: make(chan struct{}), guard: spec.Guard}, nil
}

// Start starts the child. Whoever starts it calls Wait once, as for
// exec.Cmd.
func (p *Proc) Start() error {
	closeInheritedOnExec()
	err := p.Cmd.Start()
	if err == nil && p.guard {
		startGuard(p.childEnd, p.Cmd.Process.Pid)
	}
	p.childEnd.Close()
	if err != nil {
		p.hostEnd.Close()
		close(p.done)
		return err
	}
	p.pid.Store(int64(p.Cmd.Process.Pid))
	return nil
}

// Wait reaps the child and closes Done.
func (p *Proc) Wait() error {
	p.waitErr = p.Cmd.Wait()
	close(p.done)
	return p.waitErr
}

// Done is closed when Wait returned (or Start failed).
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the child's exit error once Done is closed.
func (p *Proc) Err() error { return p.waitErr }

// Pid is the child's process id, which is also its group's id; 0 before
// it started. It is safe to call while another goroutine starts it.
func (p *Proc) Pid() int { return int(p.pid.Load()) }

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
// group, up to grace for Done, SIGKILL to the group, then up to grace
// again. The group is killed even when the child exited at once, so
// nothing it started outlives it. Stop reports whether Done closed. On a
// child that never started, Stop only releases the host pipe.
func (p *Proc) Stop(grace time.Duration) bool {
	defer p.hostEnd.Close()
	// A child abandoned before Start never took its end of the host
	// pipe; Stop releases it then (after Start it is closed already).
	defer p.childEnd.Close()
	if p.Pid() == 0 || p.stopped.Swap(true) {
		select {
		case <-p.done:
			return true
		default:
			return p.Pid() == 0
		}
	}
	_ = p.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
	}
	_ = p.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return true
	default:
	}
	t.Reset(grace)
	select {
	case <-p.done:
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
