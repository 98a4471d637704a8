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

	"github.com/dsh-go/dsh/errs"
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
	p, entry, warning, problem := r.start(command, ws, tmp, spawn{})
	if problem != "" {
		return errorResult(problem)
	}
	out := p.out
	defer out.Close()
	var served chan struct{}
	if r.proxied && entry != nil {
		l, err := entry.Listener()
		if err != nil || l == nil {
			p.Stop(0)
			_ = p.Wait()
			_ = entry.Err()
			return errorResult(fmt.Sprintf("the command's egress proxy could not be set up, so it did not run: %v", msgOrNone(err)))
		}
		served = make(chan struct{})
		go func() {
			defer close(served)
			_ = r.egress.Serve(l)
		}()
		defer func() {
			l.Close()
			<-served
		}()
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
	b.WriteString(warning)
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

// started is a command that started, with the read end of its output.
type started struct {
	*childproc.Proc
	out *os.File
}

// spawn is what a background job's start adds to a command's: its stdin,
// and the group watcher that kills it once dsh is gone.
type spawn struct {
	stdin *os.File
	guard bool
}

// start prepares and starts the command in ws with its temp dir tmp. When
// this workspace cannot be idmapped and sandbox.unavailable is warn, the
// command runs under dsh's own uid, and warning says so; under refuse
// problem does.
func (r *runner) start(command, ws, tmp string, sp spawn) (started, *sandbox.Entry, string, string) {
	st, warning := r.status, ""
	for {
		p, entry, problem, err := r.startWith(command, ws, tmp, st, sp)
		if problem != "" || err == nil {
			return p, entry, warning, problem
		}
		var e *errs.Error
		if !errors.As(err, &e) || e.Reason != "sandbox/no-idmap" || !st.Idmap {
			return p, nil, "", "the sandbox refused the command: " + msg(err)
		}
		if r.accept&sandbox.SameUID == 0 {
			return p, nil, "", "the sandbox refused the command: " + msg(err) + ". Move the workspace to a file system that supports idmapped mounts (ext4, xfs, btrfs, tmpfs), or set sandbox.unavailable: warn to run commands under dsh's own uid there."
		}
		st.Idmap, st.IdmapReason = false, msg(err)
		warning = "warning: " + msg(err) + "; this command ran under dsh's own uid (sandbox.unavailable: warn)\n"
	}
}

// startWith starts the command under st: a sandbox error (to retry or
// report) or a problem that ends the call.
func (r *runner) startWith(command, ws, tmp string, st sandbox.Status, sp spawn) (started, *sandbox.Entry, string, error) {
	env := map[string]string{}
	for k, v := range r.cfg.Env {
		env[k] = v
	}
	// The temp dir is where the sandbox lets the command write; a TMPDIR
	// from the config would point it elsewhere.
	env["TMPDIR"] = tmp
	if r.proxied {
		proxy := fmt.Sprintf("http://127.0.0.1:%d", sandbox.DefaultProxyPort)
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			env[k] = proxy
		}
		env["NO_PROXY"], env["no_proxy"] = "", ""
	}
	p, err := childproc.New(childproc.Spec{
		Path: r.shell, Args: []string{"-c", command}, Dir: ws,
		Env: env, Passthrough: r.cfg.EnvPassthrough, Guard: r.guard || sp.guard,
	})
	if err != nil {
		return started{}, nil, "could not prepare the command: " + err.Error(), nil
	}
	out, in, err := os.Pipe()
	if err != nil {
		p.Stop(0)
		return started{}, nil, "could not create the command's output pipe: " + err.Error(), nil
	}
	// One pipe for both streams keeps them in the order they were
	// written; a file (not a writer) lets Wait return when the shell
	// exits, even while a background process still holds the pipe.
	p.Cmd.Stdout, p.Cmd.Stderr = in, in
	if sp.stdin != nil {
		p.Cmd.Stdin = sp.stdin
	}
	var entry *sandbox.Entry
	if r.sandboxed {
		writable := append([]string{ws, tmp}, r.cfg.Sandbox.Writable...)
		rules := r.rules(writable, r.readOnly(ws, writable), r.hidden(ws))
		if entry, err = sandbox.Attach(p.Cmd, rules, st); err != nil {
			in.Close()
			out.Close()
			p.Stop(0)
			return started{}, nil, "", err
		}
	}
	err = p.Start()
	in.Close()
	if entry != nil {
		entry.Started()
	}
	if err != nil {
		out.Close()
		if entry != nil {
			_ = entry.Err()
		}
		return started{}, nil, fmt.Sprintf("could not start %s: %v", r.shell, err), nil
	}
	return started{Proc: p, out: out}, entry, "", nil
}

func msgOrNone(err error) string {
	if err == nil {
		return "the sandbox handed over no listener"
	}
	return msg(err)
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
