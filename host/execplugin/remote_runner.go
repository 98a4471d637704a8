package execplugin

import (
	"context"
	"io"
	"os/exec"
	"strconv"
	"syscall"

	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin/runner"
)

// groupRunner runs a plugin for go-plugin as a childproc: its environment
// is the minimal one, and go-plugin's Kill kills the whole process group —
// go-plugin's own runner kills only the direct child, and then waits for
// output pipes a grandchild may hold forever.
type groupRunner struct {
	proc           *childproc.Proc
	stdout, stderr io.ReadCloser
}

// runnerFor returns go-plugin's RunnerFunc for proc. go-plugin hands over
// a command carrying only its own variables (the handshake cookie, the
// client certificate, the socket directory): they join proc's environment.
//
// A plugin that does not serve through go-plugin's Go server (one in
// Python, say) keeps its real stdout after the handshake; what it prints
// there is copied to stdout, which skips the handshake line itself.
func runnerFor(proc *childproc.Proc, stdoutLog *outputLog) func(hclog.Logger, *exec.Cmd, string) (runner.Runner, error) {
	return func(_ hclog.Logger, spec *exec.Cmd, _ string) (runner.Runner, error) {
		cmd := proc.Cmd
		cmd.Env = append(cmd.Env, spec.Env...)
		// dsh's stdin is the user's prompt, never a plugin's.
		cmd.Stdin = nil
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		stderr, err := cmd.StderrPipe()
		if err != nil {
			return nil, err
		}
		stdoutLog.skipFirst = true
		return &groupRunner{proc: proc, stdout: teeOutput{r: stdout, w: stdoutLog}, stderr: stderr}, nil
	}
}

func (g *groupRunner) Start(context.Context) error     { return g.proc.Start() }
func (g *groupRunner) Wait(context.Context) error      { return g.proc.Wait() }
func (g *groupRunner) Kill(context.Context) error      { return g.proc.Signal(syscall.SIGKILL) }
func (g *groupRunner) Diagnose(context.Context) string { return "" }
func (g *groupRunner) Stdout() io.ReadCloser           { return g.stdout }
func (g *groupRunner) Stderr() io.ReadCloser           { return g.stderr }
func (g *groupRunner) Name() string                    { return g.proc.Cmd.Args[0] } // the configured path, also when run through a descriptor

// ID is the pid, empty until the process started: go-plugin's Kill has
// nothing to do before that.
func (g *groupRunner) ID() string {
	if pid := g.proc.Pid(); pid > 0 {
		return strconv.Itoa(pid)
	}
	return ""
}

func (g *groupRunner) PluginToHost(network, addr string) (string, string, error) {
	return network, addr, nil
}

func (g *groupRunner) HostToPlugin(network, addr string) (string, string, error) {
	return network, addr, nil
}
