package execplugin

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// window is the fixed HTTP/2 flow-control window of a plugin connection,
// the same as the SDK's (sdk.Serve): larger than any one call needs.
const window = 1 << 20

// DefaultStartTimeout bounds a plugin's whole start when the entry sets no
// start_timeout.
const DefaultStartTimeout = 10 * time.Second

// stopGrace is each step of a plugin's teardown: the graceful shutdown
// over gRPC, then SIGTERM to its process group, then SIGKILL; so a
// teardown takes at most three times this.
const stopGrace = 2 * time.Second

// process is one running plugin process: its go-plugin client and its
// child process, whose group teardown kills.
type process struct {
	client *plugin.Client
	proc   *childproc.Proc
	// mux is the process's call stream, nil when it takes its calls as
	// RPCs of their own.
	mux *muxClient
}

// stop tears the process down: go-plugin's Kill asks the plugin to exit
// over gRPC and, after its own grace, kills the process group (see
// groupRunner); Stop then sends SIGTERM and SIGKILL to the group, which
// also ends whatever the plugin left running. Each wait is bounded by
// stopGrace, so a teardown never takes longer than four of them, and that
// only when a process escaped the group and holds the plugin's output.
func (p process) stop(log hclog.Logger) {
	// Calls in flight on the stream fail now, as on a process that
	// died, rather than when the process is gone.
	p.mux.close()
	done := make(chan struct{})
	go func() {
		p.client.Kill()
		close(done)
	}()
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
	if !p.proc.Stop(stopGrace) || !waitFor(done, stopGrace) {
		log.Error("a plugin process did not exit after SIGKILL to its group; a process outside the group holds its output", "pid", p.proc.Pid())
	}
}

// waitFor reports whether done closes within d.
func waitFor(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// startPhase names the step of a start, for a start that hangs.
type startPhase string

const (
	phaseHandshake startPhase = "the handshake"
	phaseDescribe  startPhase = "Describe"
	phaseConfigure startPhase = "Configure"
)

// start launches the process, dispenses the client, describes and
// configures the plugin, all within the entry's start_timeout. A start
// that runs out of time fails with PLUGIN_TIMEOUT naming the phase; one
// whose ctx is cancelled (dsh stops) kills the process at once.
func (r *remote) start(ctx stdctx.Context) (*pluginv1.DescribeResponse, process, error) {
	e := r.entry
	limit := e.StartTimeout
	if limit == 0 {
		limit = DefaultStartTimeout
	}
	ctx, cancel := stdctx.WithTimeout(ctx, limit)
	defer cancel()
	proc, err := childproc.New(childproc.Spec{Path: e.Exec, Args: e.Args, Env: e.Env, Passthrough: e.EnvPassthrough, Guard: true})
	if err != nil {
		return nil, process{}, errs.Wrap(PluginStartFailed, err, fmt.Sprintf("plugin %q (%s) could not be prepared", e.ID, e.Exec))
	}
	// The end of what the plugin wrote to stderr goes into a start
	// failure's message: it is usually the reason.
	stderr := &tail{max: 512}
	quiet := &exitedQuietly{Logger: r.log}
	quiet.starting.Store(true)
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.VersionedPlugins(nil),
		RunnerFunc:       runnerFor(proc, newOutputLog(r.log, "stdout")),
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           quiet,
		// ctx bounds the start; go-plugin's own timer is only a backstop,
		// so a slow handshake always fails as a PLUGIN_TIMEOUT.
		StartTimeout: limit + stopGrace,
		// A Go plugin's os.Stdout and os.Stderr come over gRPC once it
		// serves; another's raw stdout is tee'd by the runner. Either way
		// its output after the handshake lands in dsh's log.
		SyncStdout: newOutputLog(r.log, "stdout"),
		SyncStderr: newOutputLog(r.log, "stderr"),
		Stderr:     stderr,
		// The environment is childproc's, complete: go-plugin must not add
		// dsh's own to it.
		SkipHostEnv: true,
		// A fixed window turns off gRPC's bandwidth estimator, which
		// answers data with a ping of its own: on a loopback connection
		// that carries small calls it measures nothing and costs a
		// write and a wake-up on each side per message exchange.
		GRPCDialOptions: []grpc.DialOption{grpc.WithInitialWindowSize(window), grpc.WithInitialConnWindowSize(window)},
	}
	p := process{client: plugin.NewClient(cfg), proc: proc}
	fail := func(err error, what string) (*pluginv1.DescribeResponse, process, error) {
		// What failed to start is not worth a graceful shutdown, and one
		// that hangs would not honour it.
		proc.Kill()
		p.stop(r.log)
		if last := stderr.String(); last != "" {
			what += fmt.Sprintf(" (its stderr ended with %q)", last)
		}
		return nil, process{}, errs.Wrap(PluginStartFailed, err, fmt.Sprintf("plugin %q (%s): %s", e.ID, e.Exec, what))
	}
	// ended reports a step cut by the start's deadline or by dsh stopping.
	// A failed step counts as cut once the deadline passed by the clock:
	// gRPC may fail the call a moment before ctx's own timer fires, and
	// that is a timeout, not a broken plugin.
	deadline, _ := ctx.Deadline()
	ended := func(err error) bool {
		return ctx.Err() != nil || (err != nil && !time.Now().Before(deadline))
	}
	timedOut := func(phase startPhase, err error) (*pluginv1.DescribeResponse, process, error) {
		proc.Kill()
		p.stop(r.log)
		if ctx.Err() != nil && !errors.Is(ctx.Err(), stdctx.DeadlineExceeded) {
			return nil, process{}, errs.Wrap(PluginStartFailed, err, fmt.Sprintf("plugin %q (%s): its start was abandoned during %s because dsh is stopping", e.ID, e.Exec, phase))
		}
		return nil, process{}, errs.Wrap(PluginTimeout, err, fmt.Sprintf(
			"plugin %q (%s) did not finish starting within %s: it hung in %s; start_timeout bounds the handshake, Describe and Configure together — raise it, or fix the plugin",
			e.ID, e.Exec, limit, phase)).WithReason(ReasonStartTimeout)
	}
	// go-plugin checks a checksum only on a command it starts itself; pin
	// checks it on the file the process is started from.
	if err := checkPins(e); err != nil {
		return fail(err, pinHint)
	}
	exe, err := pin(e, proc)
	if err != nil {
		return fail(err, startHint(err))
	}
	if exe != nil {
		// The child has its own copy once it started; the handshake
		// below returns only after that (or after a failed start).
		defer exe.Close()
	}
	conn, err := r.handshake(ctx, p)
	if ended(err) {
		return timedOut(phaseHandshake, err)
	}
	if err != nil {
		return fail(err, startHint(err))
	}
	raw, err := conn.Dispense(sdk.PluginName)
	if err != nil {
		return fail(err, "the plugin does not serve the dsh protocol")
	}
	rpc := raw.(pluginv1.PluginClient)
	var health grpc_health_v1.HealthClient
	if gc, ok := conn.(*plugin.GRPCClient); ok {
		health = grpc_health_v1.NewHealthClient(gc.Conn)
	}
	desc, err := rpc.Describe(ctx, &pluginv1.DescribeRequest{ProtocolVersion: sdk.ProtocolVersion, Capabilities: Capabilities()})
	if expired(ctx, err) {
		return timedOut(phaseDescribe, err)
	}
	if err != nil {
		return fail(err, "Describe failed")
	}
	if err := checkRequires(e, desc); err != nil {
		proc.Kill()
		p.stop(r.log)
		return nil, process{}, err
	}
	config := []byte("{}")
	if len(e.Config) > 0 {
		if config, err = json.Marshal(e.Config); err != nil {
			return fail(err, "its config cannot be sent as JSON")
		}
	}
	res, err := rpc.Configure(ctx, &pluginv1.ConfigureRequest{ConfigJson: config, EntryId: e.ID})
	if expired(ctx, err) {
		return timedOut(phaseConfigure, err)
	}
	if err != nil {
		return fail(err, "Configure failed")
	}
	if res.Error != nil {
		proc.Kill()
		p.stop(r.log)
		return nil, process{}, errs.Wrap(errs.CodeOf(sdk.ErrorFromProto(res.Error)), sdk.ErrorFromProto(res.Error),
			fmt.Sprintf("plugin %q (%s) rejected its config", e.ID, e.Exec))
	}
	quiet.starting.Store(false)
	if accepts(desc, CapMux) {
		p.mux = openMux(rpc, r.stallError)
	}
	r.mu.Lock()
	r.rpc = rpc
	r.health = health
	r.muxStalls = 0
	// A restart may run a newer or older build: what it accepts is asked
	// anew each time.
	r.batch = accepts(desc, CapEmitBatch)
	r.mu.Unlock()
	r.log.Debug("plugin started", "name", desc.Name, "version", desc.Version, "listeners", len(desc.Listeners))
	return desc, p, nil
}

// handshake runs go-plugin's handshake, which takes no context, so that
// ctx still ends it: killing the process group makes it return.
func (r *remote) handshake(ctx stdctx.Context, p process) (plugin.ClientProtocol, error) {
	type result struct {
		conn plugin.ClientProtocol
		err  error
	}
	out := make(chan result, 1)
	go func() {
		conn, err := p.client.Client()
		out <- result{conn, err}
	}()
	select {
	case res := <-out:
		return res.conn, res.err
	case <-ctx.Done():
		p.proc.Kill()
		res := <-out // bounded: the process and its pipes are gone
		if res.err == nil {
			res.err = ctx.Err()
		}
		return nil, res.err
	}
}

// exitedQuietly is the logger go-plugin gets. While a plugin starts, its
// process exiting or being killed is what a failed start returns as its
// error; go-plugin also logs it (the process "exited", it "failed to exit
// gracefully"), which showed every start failure twice, so those lines are
// demoted to debug until the start succeeded. A plugin that crashes or
// ignores the shutdown later gets them at their own level, and everything
// else — the plugin's own log lines included — passes through unchanged.
type exitedQuietly struct {
	hclog.Logger
	starting atomic.Bool
}

func (l *exitedQuietly) demoted(msg string) bool {
	return l.starting.Load() && (msg == "plugin failed to exit gracefully" || msg == "plugin process exited")
}

func (l *exitedQuietly) Warn(msg string, args ...any) {
	if l.demoted(msg) {
		l.Logger.Debug(msg, args...)
		return
	}
	l.Logger.Warn(msg, args...)
}

func (l *exitedQuietly) Error(msg string, args ...any) {
	if l.demoted(msg) {
		l.Logger.Debug(msg, args...)
		return
	}
	l.Logger.Error(msg, args...)
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.buf))
}

// pluginVersion finds the version a refused plugin announced in
// go-plugin's "Incompatible API version with plugin. Plugin version: 1, …".
var pluginVersion = lazyregexp.New(`Plugin version: (\d+)`)

// startHint says what a start failure most likely means.
func startHint(err error) string {
	text := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return "the binary does not match the sha256 in the config; rebuild or update the checksum"
	case strings.Contains(text, "incompatible api version"), strings.Contains(text, "incompatible core api version"):
		theirs := "another protocol version"
		if m := pluginVersion.FindStringSubmatch(err.Error()); m != nil {
			theirs = "dsh plugin protocol " + m[1]
		}
		return fmt.Sprintf("it speaks %s and this host speaks dsh plugin protocol %d; rebuild it against this dsh's sdk (or, for a plugin in another language, against this dsh's sdk/proto/pluginv1)", theirs, sdk.ProtocolVersion)
	case strings.Contains(text, "failed to read any lines"), strings.Contains(text, "plugin exited before we could connect"):
		return "it exited without a handshake; a dsh plugin calls sdk.Serve (see examples/plugin-admission)"
	case strings.Contains(text, "unrecognized remote plugin message"):
		return "the handshake is corrupted: the plugin wrote to stdout before its handshake line; log to stderr instead"
	case strings.Contains(text, "timeout while waiting for plugin to start"):
		return "it did not answer the handshake in time"
	case strings.Contains(text, "exec format error"):
		return "the file is not a program this machine can run; build the plugin for this OS and architecture"
	case strings.Contains(text, "executable file not found"), strings.Contains(text, "no such file"), strings.Contains(text, "permission denied"):
		return "the binary is missing or not executable"
	}
	return "it could not be started"
}

// expired reports whether a start call ended because ctx did. gRPC runs its
// own timer from ctx's deadline and can fail the call with DeadlineExceeded
// a moment before ctx's timer fires; waiting for ctx then keeps that from
// passing for a plugin error. Only a ctx with a deadline is waited for, so
// the wait is bounded by it.
func expired(ctx stdctx.Context, err error) bool {
	if _, bounded := ctx.Deadline(); bounded && status.Code(err) == codes.DeadlineExceeded {
		<-ctx.Done()
	}
	return ctx.Err() != nil
}
