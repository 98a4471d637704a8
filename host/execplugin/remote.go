// Package execplugin is the bridge to plugin binaries (exec: entries): it
// starts the binary through go-plugin in its own process group, speaks the
// gRPC protocol of sdk/proto/pluginv1, proxies the events the binary
// listens to, and supervises it — call timeouts, restarts within a window,
// bounded teardown. Package host mounts one Plugin per exec: entry.
package execplugin

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/trace"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// Codes of plugin binaries.
const (
	// PluginStartFailed: the binary could not be started or did not
	// complete the handshake.
	PluginStartFailed errs.Code = "PLUGIN_START_FAILED"
	// PluginCrashed: the process died during a call.
	PluginCrashed errs.Code = "PLUGIN_CRASHED"
	// PluginProtocol: the plugin broke the protocol.
	PluginProtocol errs.Code = "PLUGIN_PROTOCOL"
	// PluginTimeout: a call did not answer before its deadline (the
	// entry's timeout or the caller's), or a start did not finish within
	// start_timeout.
	PluginTimeout errs.Code = "PLUGIN_TIMEOUT"
	// PluginStalled: the plugin stopped reading the stream its calls
	// share (a Go plugin's Mux stream), so a send to it outlived its
	// caller; dsh closed the stream, and this is the error of the other
	// calls that were on it.
	PluginStalled errs.Code = "PLUGIN_STALLED"
)

// Reasons of plugin binaries.
const (
	// ReasonUnavailable is the refusal reason while a plugin is down and
	// being restarted, and its entry says on_unavailable: fail.
	ReasonUnavailable = "host/plugin-unavailable"
	// ReasonGivenUp is the refusal reason once a plugin crashed more than
	// max_restarts times within restart_window and dsh stopped restarting
	// it.
	ReasonGivenUp = "host/plugin-given-up"
	// ReasonStartTimeout marks a PLUGIN_TIMEOUT of a start.
	ReasonStartTimeout = "host/plugin-start-timeout"
)

// DefaultCallTimeout bounds each call into a plugin whose entry sets no
// timeout; timeout: 0 removes the bound.
const DefaultCallTimeout = 30 * time.Second

// remote is one plugin binary: its process, its client, its supervisor.
type remote struct {
	entry config.Entry
	log   hclog.Logger

	mu     sync.Mutex
	proc   process // the current process; exited while down
	rpc    pluginv1.PluginClient
	health grpc_health_v1.HealthClient // the current process's health service
	// stuck is why the current process failed its health check; calls are
	// refused with it until a new process serves.
	stuck error
	// muxStalls counts the stalls of the current process's call stream,
	// which space its reopening out.
	muxStalls int
	// probe asks the supervisor for a health check now.
	probe   chan struct{}
	batch   bool        // the current process accepts EmitBatch
	crashes []time.Time // within the restart window
	givenUp int         // the crashes it was given up after; 0 while supervised
	closed  bool
	down    chan struct{} // closed by the supervisor when it stops
	stop    chan struct{}
	// stopCtx ends with stop, so a restart in progress ends with dsh.
	stopCtx    stdctx.Context
	cancelStop stdctx.CancelFunc
	// emits queues notifications for the sender goroutine, so an emitter
	// never waits for the plugin.
	emits chan *pluginv1.EmitRequest
	// emitsFull wakes a sender lingering over a batch of stream chunks
	// once chunkBatch notifications are queued.
	emitsFull chan struct{}
	emitDone  chan struct{}
	drops     dropCounter
	// toolDecls are the tools of the first start, which stay registered
	// across restarts.
	toolDecls []*pluginv1.ToolDecl
}

func newRemote(e config.Entry, log hclog.Logger) *remote {
	r := &remote{entry: e, log: log, stop: make(chan struct{}), down: make(chan struct{}), probe: make(chan struct{}, 1),
		emits: make(chan *pluginv1.EmitRequest, emitQueue), emitsFull: make(chan struct{}, 1), emitDone: make(chan struct{})}
	r.stopCtx, r.cancelStop = stdctx.WithCancel(stdctx.Background())
	return r
}

// Plugin is the dshctx.Plugin of an exec: entry. remote is the running
// plugin once Apply succeeded.
type Plugin struct {
	entry  config.Entry
	remote *remote
}

// New returns the plugin of an exec: entry; applying it starts the binary.
func New(e config.Entry) *Plugin { return &Plugin{entry: e} }

// Name names the fiber after the entry.
func (p *Plugin) Name() string { return "exec:" + p.entry.ID }

// Inject names the tools service, where the binary's tools are registered.
func (p *Plugin) Inject() []dshctx.ServiceKey { return []dshctx.ServiceKey{tools.Key} }

// Apply starts the binary, checks what it listens to, configures it,
// registers a proxy listener for each of its events in ctx, so a plugin in
// a preset hears only its agent, and then the tools it declares, in the
// same scope.
func (p *Plugin) Apply(ctx *dshctx.Context, _ any) error {
	r := newRemote(p.entry, ctx.Logger())
	p.remote = r
	if s := unpinnedScripts(p.entry); len(s) > 0 {
		ctx.Logger().Warn(fmt.Sprintf("plugin %q: sha256 pins only %s, not %s it runs; list the script under pin: so a changed script is refused",
			p.entry.ID, p.entry.Exec, strings.Join(s, ", ")))
	}
	desc, proc, err := r.start(ctx)
	if err != nil {
		r.cancelStop()
		if p.entry.Optional && ctx.Err() == nil {
			// One broken extra must not keep dsh from starting: say why
			// once, and run without it.
			ctx.Logger().Warn(fmt.Sprintf("plugin %q (%s) is optional and failed to start; dsh runs without it until the next reload or restart", p.entry.ID, p.entry.Exec), "error", err)
			return nil
		}
		return err
	}
	r.mu.Lock()
	r.proc = proc
	r.toolDecls = desc.Tools // before the supervisor compares a restart's with them
	r.mu.Unlock()
	// The supervisor and the notification sender run from here on, so
	// close can always wait for them; disposal stops them, then the
	// process (gracefully first).
	go r.supervise()
	go r.sendEmits()
	if _, err := ctx.OnDispose("plugin process", func() error { r.close(); return nil }); err != nil {
		r.close()
		return err
	}
	for _, l := range desc.Listeners {
		b, ok := bridges[l.Event]
		if !ok || l.Kind != b.kind {
			return errs.New(PluginProtocol, fmt.Sprintf(
				"plugin %q (%s) listens to %q as %s, which plugin binaries cannot listen to yet; known: %s",
				p.entry.ID, p.entry.Exec, l.Event, l.Kind, bridgeNames()))
		}
		if err := b.register(ctx, r, l.Prepend); err != nil {
			return err
		}
	}
	return r.registerTools(ctx, desc.Tools)
}

func bridgeNames() string {
	var names []string
	for n := range bridges {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// current returns the live client, or nil while the plugin is down or
// failed its health check.
func (r *remote) current() pluginv1.PluginClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc.client == nil || r.proc.client.Exited() || r.stuck != nil {
		return nil
	}
	return r.rpc
}

func (r *remote) protocolError(format string, args ...any) error {
	return errs.New(PluginProtocol, fmt.Sprintf("plugin %q (%s) broke the protocol: ", r.entry.ID, r.entry.Exec)+fmt.Sprintf(format, args...))
}

// call runs one waterfall invocation on a stream: the plugin may ask for
// next once, which runs in this goroutine (the waterfall requires it), and
// then answers.
func (r *remote) call(ctx stdctx.Context, event, scope string, payload *pluginv1.Payload, next func(stdctx.Context, *pluginv1.Payload) (*pluginv1.Result, error)) (res *pluginv1.Result, err error) {
	if telemetry.Enabled() {
		var span trace.Span
		ctx, span = r.startSpan(ctx, "Call", event)
		defer func() { telemetry.End(span, err) }()
	}
	return r.callRPC(ctx, event, scope, payload, next)
}

func (r *remote) callRPC(ctx stdctx.Context, event, scope string, payload *pluginv1.Payload, next func(stdctx.Context, *pluginv1.Payload) (*pluginv1.Result, error)) (*pluginv1.Result, error) {
	rpc := r.current()
	if rpc == nil {
		return nil, r.whileDown()
	}
	var own time.Time // the entry's own deadline, if it has one
	if t := r.callTimeout(); t > 0 {
		own = time.Now().Add(t)
		var cancel stdctx.CancelFunc
		ctx, cancel = stdctx.WithDeadline(ctx, own)
		defer cancel()
	}
	if m := r.currentMux(); m != nil {
		res, err := r.callMux(ctx, m, own, event, scope, payload, next)
		if !errors.Is(err, errMuxBroken) {
			return res, err
		}
	}
	cctx, cancel := stdctx.WithCancel(ctx)
	defer cancel()
	stream, err := rpc.Call(cctx)
	if notConnected(err) {
		return nil, r.whileDown()
	}
	if err != nil {
		return nil, r.callError(ctx, own, err)
	}
	if err := stream.Send(&pluginv1.HostMessage{Msg: &pluginv1.HostMessage_Start{Start: &pluginv1.CallStart{Event: event, Payload: payload, ScopeTag: scope}}}); err != nil {
		if errors.Is(err, io.EOF) {
			// The plugin ended the stream before the start reached it (a
			// server at its concurrency limit refuses that way): Send says
			// only io.EOF, and the stream's status — RESOURCE_EXHAUSTED,
			// say — is what Recv returns.
			if _, rerr := stream.Recv(); rerr != nil && !errors.Is(rerr, io.EOF) {
				err = rerr
			}
		}
		if notConnected(err) {
			return nil, r.whileDown()
		}
		return nil, r.callError(ctx, own, err)
	}
	// Receiving on this goroutine rather than on a reader goroutine saves
	// two goroutine hand-offs per call (about 8% of a call's latency here;
	// waking goroutines on other threads is what a call mostly waits for).
	// A cancelled cctx ends a pending Recv.
	msg, err := stream.Recv()
	if notConnected(err) {
		// A stream's connection error can surface at its first Recv.
		return nil, r.whileDown()
	}
	if err != nil {
		return nil, r.callError(ctx, own, err)
	}
	if req := msg.GetNext(); req != nil {
		if msg, err = r.runNext(cctx, cancel, stream, req.Payload, next); err != nil {
			return nil, r.callError(ctx, own, err)
		}
		if msg.GetNext() != nil {
			return nil, r.protocolError("it asked for next twice in one call of %s", event)
		}
	}
	return r.callResult(ctx, own, event, msg)
}

// callResult is what the plugin's last message of a call says.
func (r *remote) callResult(ctx stdctx.Context, own time.Time, event string, msg *pluginv1.PluginMessage) (*pluginv1.Result, error) {
	res := msg.GetResult()
	if res == nil {
		return nil, r.protocolError("it sent an unknown message during %s", event)
	}
	if res.Error != nil {
		// A plugin that honours the deadline answers with its own error
		// the moment the deadline passes, which can reach this process
		// before its own timer fires: the clock, not ctx.Err(), decides.
		if pastDeadline(ctx) {
			return nil, r.timeoutError(ctx, own, sdk.ErrorFromProto(res.Error))
		}
		return nil, sdk.ErrorFromProto(res.Error)
	}
	return res.Result, nil
}

// watchAfter is how long next runs before the host starts watching the
// stream for a plugin that stops waiting. Almost every next ends sooner, and
// those calls then need no second goroutine; a plugin that gives up on a
// longer next is noticed at most this late. Always watching moves the
// plugin's answer onto the watcher goroutine, one more hand-off per call:
// BenchmarkPluginCall's p50 rose from a median of 396 to 486 µs.
const watchAfter = time.Millisecond

// runNext runs the rest of the chain for the plugin, answers it, and
// returns the plugin's next message. Anything the plugin sends while next
// runs means it no longer waits: next is cancelled and that message is
// returned instead of sending the answer nobody reads.
func (r *remote) runNext(cctx stdctx.Context, endCall stdctx.CancelFunc, stream pluginv1.Plugin_CallClient, payload *pluginv1.Payload, next func(stdctx.Context, *pluginv1.Payload) (*pluginv1.Result, error)) (*pluginv1.PluginMessage, error) {
	type received struct {
		msg *pluginv1.PluginMessage
		err error
	}
	// The watcher owns stream.Recv from the moment it starts; it receives
	// exactly one message, which the buffer keeps if nobody waits for it.
	// Whatever that message is, the plugin expects nothing more of this
	// call, so ending the call is what cancels next.
	watched := make(chan received, 1)
	watcher := time.AfterFunc(watchAfter, func() {
		msg, err := stream.Recv()
		watched <- received{msg, err} // before endCall: next may return at once
		endCall()
	})
	out, err := next(cctx, payload)
	if watcher.Stop() {
		// Never started: this goroutine still owns Recv.
		answerNext(stream, out, err)
		return stream.Recv()
	}
	select {
	case in := <-watched:
		return in.msg, in.err // it gave up while next ran
	default:
	}
	answerNext(stream, out, err)
	in := <-watched
	return in.msg, in.err
}

// answerNext sends next's outcome to the plugin. Its error is not checked:
// when the stream has ended — the plugin answered on its own, died, or the
// call was cancelled — the Recv that follows reports which.
func answerNext(stream pluginv1.Plugin_CallClient, out *pluginv1.Result, err error) {
	_ = stream.Send(&pluginv1.HostMessage{Msg: &pluginv1.HostMessage_NextResult{NextResult: nextResult(out, err)}})
}

func nextResult(out *pluginv1.Result, err error) *pluginv1.NextResult {
	return &pluginv1.NextResult{Result: out, Error: sdk.ErrorToProto(err)}
}

// callError explains why a call's stream failed.
func (r *remote) callError(ctx stdctx.Context, own time.Time, err error) error {
	if status.Code(err) == codes.ResourceExhausted {
		return r.busyError(err)
	}
	if errs.HasCode(err, PluginStalled) {
		return err
	}
	// The deadline travels with the call, so the plugin's side may end the
	// stream a moment before the host's own timer fires.
	if errors.Is(ctx.Err(), stdctx.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded || pastDeadline(ctx) {
		return r.timeoutError(ctx, own, err)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.mu.Lock()
	exited := r.proc.client != nil && r.proc.client.Exited()
	stuck := r.stuck
	r.mu.Unlock()
	if stuck != nil {
		// The call was in flight when the stuck process was killed.
		return stuck
	}
	if exited {
		return errs.Wrap(PluginCrashed, err, fmt.Sprintf("plugin %q (%s) exited during the call", r.entry.ID, r.entry.Exec))
	}
	return errs.Wrap(PluginCrashed, err, fmt.Sprintf("the call to plugin %q (%s) failed", r.entry.ID, r.entry.Exec))
}

// pastDeadline reports whether ctx's deadline has passed, whether or not
// its timer has fired yet.
func pastDeadline(ctx stdctx.Context) bool {
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// timeoutError is PLUGIN_TIMEOUT for a call whose deadline passed: the
// entry's own (own) or the caller's, whose context.DeadlineExceeded stays
// matchable with errors.Is.
func (r *remote) timeoutError(ctx stdctx.Context, own time.Time, cause error) error {
	r.probeSoon()
	if dl, _ := ctx.Deadline(); !own.IsZero() && !dl.Before(own) {
		return errs.Wrap(PluginTimeout, cause, fmt.Sprintf("plugin %q (%s) did not answer within %s, its entry's timeout; raise timeout: in the entry, or fix the plugin", r.entry.ID, r.entry.Exec, r.callTimeout()))
	}
	return errs.Wrap(PluginTimeout, stdctx.DeadlineExceeded, fmt.Sprintf("plugin %q (%s) did not answer before the caller's deadline", r.entry.ID, r.entry.Exec))
}

// callTimeout is the bound of one call; 0 means none.
func (r *remote) callTimeout() time.Duration {
	if r.entry.Timeout == nil {
		return DefaultCallTimeout
	}
	return *r.entry.Timeout
}

// close stops the supervisor, a restart in progress, the notification
// sender and the process, each bounded.
func (r *remote) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	r.cancelStop()
	close(r.stop)
	<-r.down
	<-r.emitDone
	r.mu.Lock()
	p := r.proc
	r.mu.Unlock()
	if p.client != nil {
		p.stop(r.log)
	}
	r.drops.flush(r.log, r.entry)
}
