package bash

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/services/tools"
)

// killGrace is how long a command's group has between SIGTERM and
// SIGKILL, and how long output held open by a process that left the
// group is waited for.
const killGrace = 2 * time.Second

// run runs command in ws and describes how it ended. A command that ran
// and failed is a result the model reads, never a Go error.
func (r *runner) run(ctx stdctx.Context, command, ws string, timeout time.Duration) tools.Result {
	tmp, err := os.MkdirTemp("", "dsh-bash-")
	if err != nil {
		return errorResult("could not create the command's temp dir: " + err.Error() + "; check that dsh's TMPDIR is writable")
	}
	defer os.RemoveAll(tmp)
	env := map[string]string{}
	for k, v := range r.cfg.Env {
		env[k] = v
	}
	// The temp dir is where the sandbox lets the command write; a TMPDIR
	// from the config would point it elsewhere.
	env["TMPDIR"] = tmp
	p, err := childproc.New(childproc.Spec{
		Path: r.shell, Args: []string{"-c", command}, Dir: ws,
		Env: env, Passthrough: r.cfg.EnvPassthrough,
	})
	if err != nil {
		return errorResult("could not prepare the command: " + err.Error())
	}
	out, in, err := os.Pipe()
	if err != nil {
		p.Stop(0)
		return errorResult("could not create the command's output pipe: " + err.Error())
	}
	defer out.Close()
	// One pipe for both streams keeps them in the order they were
	// written; a file (not a writer) lets Wait return when the shell
	// exits, even while a background process still holds the pipe.
	p.Cmd.Stdout, p.Cmd.Stderr = in, in
	var entry *sandbox.Entry
	if r.sandboxed {
		rules := sandbox.Rules{Writable: append([]string{ws, tmp}, r.cfg.Sandbox.Writable...), Network: r.network}
		if entry, err = sandbox.Attach(p.Cmd, rules, r.status); err != nil {
			in.Close()
			p.Stop(0)
			return errorResult("the sandbox refused the command: " + msg(err))
		}
	}
	err = p.Start()
	in.Close()
	if entry != nil {
		entry.Started()
	}
	if err != nil {
		return errorResult(fmt.Sprintf("could not start %s: %v", r.shell, err))
	}
	captured := newCapture(r.cfg.MaxOutputBytes)
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(captured, out)
	}()
	exited := make(chan struct{})
	go func() {
		_ = p.Wait()
		close(exited)
	}()

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var ending string
	select {
	case <-exited:
	case <-timer.C:
		ending = fmt.Sprintf("timed out after %s: the command and every process it started were killed", timeout)
	case <-ctx.Done():
		ending = "cancelled: the command and every process it started were killed"
	}
	// The whole group goes, after a normal exit too: nothing the command
	// left in the background outlives it.
	p.Stop(killGrace)
	<-exited
	escaped := drain(out, copied)

	var b strings.Builder
	if entry != nil {
		if err := entry.Err(); err != nil {
			return errorResult(msg(err))
		}
	}
	text := captured.String()
	if text == "" {
		text = "(no output)"
	}
	b.WriteString(text)
	if !strings.HasSuffix(text, "\n") {
		b.WriteByte('\n')
	}
	if escaped {
		b.WriteString("[output still held open by a process that left the command's process group was not waited for]\n")
	}
	isErr := true
	switch state := p.Cmd.ProcessState; {
	case ending != "":
		b.WriteString(ending)
	case state == nil:
		b.WriteString("the command's exit status is unknown")
	case state.Exited():
		fmt.Fprintf(&b, "exit code: %d", state.ExitCode())
		isErr = state.ExitCode() != 0
	default:
		if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			fmt.Fprintf(&b, "killed by signal %s", ws.Signal())
		} else {
			b.WriteString(state.String())
		}
	}
	return tools.Result{Content: b.String(), IsError: isErr}
}

// drain waits for the output copy to end once the group is gone; a
// process that left the group (setsid) may hold the pipe open, so the
// wait is bounded, and drain reports whether it ran out.
func drain(out *os.File, copied <-chan struct{}) bool {
	t := time.NewTimer(killGrace)
	defer t.Stop()
	select {
	case <-copied:
		return false
	case <-t.C:
	}
	if err := out.SetReadDeadline(time.Now()); err != nil && !errors.Is(err, os.ErrNoDeadline) {
		out.Close()
	}
	<-copied
	return true
}
