package faults

import (
	"bytes"
	stdctx "context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hangLimit only catches a hang: a run that reaches it fails the test. No
// assertion is made on how long a run took.
const hangLimit = 90 * time.Second

// lockedBuffer is an io.Writer the test can read while dsh writes to it,
// with a signal for the first byte.
type lockedBuffer struct {
	mu    sync.Mutex
	b     bytes.Buffer
	first chan struct{}
}

func newBuffer() *lockedBuffer { return &lockedBuffer{first: make(chan struct{})} }

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() == 0 && len(p) > 0 {
		close(l.first)
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// dshRun is one `dsh` process in its own process group, killed as a group
// when the test ends.
type dshRun struct {
	cmd            *exec.Cmd
	stdout, stderr *lockedBuffer
	done           chan struct{}
	err            error
}

// startDsh starts `dsh run --config cfg args...` in workdir. wrap, when
// set, is a shell prefix (e.g. "ulimit -f 4;").
func startDsh(t *testing.T, b bins, workdir, cfg, wrap string, args ...string) *dshRun {
	t.Helper()
	argv := append([]string{b.dsh, "run", "--config", cfg}, args...)
	var cmd *exec.Cmd
	if wrap != "" {
		cmd = exec.Command("sh", append([]string{"-c", wrap + ` exec "$@"`, "sh"}, argv...)...)
	} else {
		cmd = exec.Command(argv[0], argv[1:]...)
	}
	cmd.Dir = workdir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + workdir}
	cmd.Stdin = nil // /dev/null: headless
	r := &dshRun{cmd: cmd, stdout: newBuffer(), stderr: newBuffer(), done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = r.stdout, r.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		r.err = cmd.Wait()
		close(r.done)
	}()
	t.Cleanup(func() {
		r.killGroup()
		<-r.done
	})
	return r
}

// killGroup sends SIGKILL to dsh and everything it started.
func (r *dshRun) killGroup() { syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL) }

// wait returns the exit code, failing the test if dsh hangs.
func (r *dshRun) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(hangLimit):
		r.killGroup()
		<-r.done
		t.Fatalf("dsh hung (killed after %v)\nstdout: %s\nstderr: %s", hangLimit, r.stdout, r.stderr)
	}
	var exit *exec.ExitError
	if errors.As(r.err, &exit) {
		return exit.ExitCode()
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return 0
}

// waitFor waits for a signal from dsh (its first output, a marker file),
// failing the test if dsh ends first or never sends it.
func (r *dshRun) waitFor(t *testing.T, what string, signal <-chan struct{}) {
	t.Helper()
	select {
	case <-signal:
	case <-r.done:
		t.Fatalf("dsh ended before %s (%v)\nstdout: %s\nstderr: %s", what, r.err, r.stdout, r.stderr)
	case <-time.After(hangLimit):
		t.Fatalf("no %s from dsh\nstderr: %s", what, r.stderr)
	}
}

// fileAppears closes its channel once path exists. The check polls: a file
// created by another process offers no other signal.
func fileAppears(ctx stdctx.Context, path string) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		for {
			if _, err := os.Stat(path); err == nil {
				close(ch)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return ch
}

// writeFile writes a config (or any file) into dir and returns its path.
func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func removeMarker(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}
