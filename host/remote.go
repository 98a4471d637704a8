package host

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc/codes"
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
	// PluginTimeout: a call took longer than the entry's timeout.
	PluginTimeout errs.Code = "PLUGIN_TIMEOUT"
)

// ReasonUnavailable is the refusal reason while a plugin is down and its
// entry says on_unavailable: fail.
const ReasonUnavailable = "host/plugin-unavailable"

// remote is one plugin binary: its process, its client, its supervisor.
type remote struct {
	entry Entry
	log   hclog.Logger

	mu       sync.Mutex
	client   *plugin.Client
	rpc      pluginv1.PluginClient
	restarts int
	closed   bool
	down     chan struct{} // closed by the supervisor when it stops
	stop     chan struct{}
	// emits queues notifications for the sender goroutine, so an emitter
	// never waits for the plugin.
	emits    chan *pluginv1.EmitRequest
	emitDone chan struct{}
}

// enqueueEmit queues a notification; when the queue is full the
// notification is dropped with a warning rather than block the emitter.
func (r *remote) enqueueEmit(req *pluginv1.EmitRequest) {
	select {
	case r.emits <- req:
	default:
		r.log.Warn("plugin is behind on notifications; dropped one", "event", req.Event)
	}
}

// sendEmits delivers queued notifications in order until stop.
func (r *remote) sendEmits() {
	defer close(r.emitDone)
	for {
		select {
		case <-r.stop:
			return
		case req := <-r.emits:
			rpc := r.current()
			if rpc == nil {
				continue // down: a notification is not worth waiting for
			}
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), max(r.entry.Timeout, 10*time.Second))
			res, err := rpc.Emit(ctx, req)
			cancel()
			if err == nil && res.Error != nil {
				err = sdk.ErrorFromProto(res.Error)
			}
			if err != nil {
				r.log.Warn("plugin failed a notification", "event", req.Event, "error", err)
			}
		}
	}
}

// execPlugin is the dshctx.Plugin of an exec: entry. remote is the running
// plugin once Apply succeeded.
type execPlugin struct {
	entry  Entry
	remote *remote
}

func (p *execPlugin) Name() string { return "exec:" + p.entry.ID }

// Apply starts the binary, checks what it listens to, configures it and
// registers a proxy listener for each of its events in ctx, so a plugin in
// a preset hears only its agent.
func (p *execPlugin) Apply(ctx *dshctx.Context, _ any) error {
	r := &remote{entry: p.entry, log: ctx.Logger(), stop: make(chan struct{}), down: make(chan struct{}),
		emits: make(chan *pluginv1.EmitRequest, 1024), emitDone: make(chan struct{})}
	p.remote = r
	desc, err := r.start(ctx)
	if err != nil {
		return err
	}
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
	return nil
}

func bridgeNames() string {
	var names []string
	for n := range bridges {
		names = append(names, n)
	}
	sort.Strings(names)
	return orNone(names)
}

// start launches the process, dispenses the client, describes and
// configures the plugin.
func (r *remote) start(ctx stdctx.Context) (*pluginv1.DescribeResponse, error) {
	e := r.entry
	cmd := exec.Command(e.Exec, e.Args...)
	// The entry's variables go after the inherited ones, so they win; hence
	// SkipHostEnv below, or go-plugin would append os.Environ after them.
	cmd.Env = os.Environ()
	for _, name := range slices.Sorted(maps.Keys(e.Env)) {
		cmd.Env = append(cmd.Env, name+"="+e.Env[name])
	}
	setParentDeathSignal(cmd)
	// The end of what the plugin wrote to stderr goes into a start
	// failure's message: it is usually the reason.
	stderr := &tail{max: 512}
	quiet := &exitedQuietly{Logger: r.log}
	quiet.starting.Store(true)
	cfg := &plugin.ClientConfig{
		HandshakeConfig:  sdk.Handshake,
		VersionedPlugins: sdk.VersionedPlugins(nil),
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		AutoMTLS:         true,
		Logger:           quiet,
		StartTimeout:     e.StartTimeout,
		SyncStdout:       io.Discard,
		SyncStderr:       io.Discard,
		Stderr:           stderr,
		SkipHostEnv:      true,
	}
	if cfg.StartTimeout == 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if e.SHA256 != "" {
		sum, _ := hex.DecodeString(e.SHA256)
		cfg.SecureConfig = &plugin.SecureConfig{Checksum: sum, Hash: sha256.New()}
	}
	client := plugin.NewClient(cfg)
	fail := func(err error, what string) (*pluginv1.DescribeResponse, error) {
		client.Kill() // also waits for the stderr copy
		if last := stderr.String(); last != "" {
			what += fmt.Sprintf(" (its stderr ended with %q)", last)
		}
		return nil, errs.Wrap(PluginStartFailed, err, fmt.Sprintf("plugin %q (%s): %s", e.ID, e.Exec, what))
	}
	conn, err := client.Client()
	if err != nil {
		return fail(err, startHint(err))
	}
	raw, err := conn.Dispense(sdk.PluginName)
	if err != nil {
		return fail(err, "the plugin does not serve the dsh protocol")
	}
	rpc := raw.(pluginv1.PluginClient)
	desc, err := rpc.Describe(ctx, &pluginv1.DescribeRequest{ProtocolVersion: sdk.ProtocolVersion})
	if err != nil {
		return fail(err, "Describe failed")
	}
	config := []byte("{}")
	if len(e.Config) > 0 {
		if config, err = json.Marshal(e.Config); err != nil {
			return fail(err, "its config cannot be sent as JSON")
		}
	}
	res, err := rpc.Configure(ctx, &pluginv1.ConfigureRequest{ConfigJson: config, EntryId: e.ID})
	if err != nil {
		return fail(err, "Configure failed")
	}
	if res.Error != nil {
		client.Kill()
		return nil, errs.Wrap(errs.CodeOf(sdk.ErrorFromProto(res.Error)), sdk.ErrorFromProto(res.Error),
			fmt.Sprintf("plugin %q (%s) rejected its config", e.ID, e.Exec))
	}
	quiet.starting.Store(false)
	r.mu.Lock()
	r.client, r.rpc = client, rpc
	r.mu.Unlock()
	r.log.Debug("plugin started", "name", desc.Name, "version", desc.Version, "listeners", len(desc.Listeners))
	return desc, nil
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

// startHint says what a start failure most likely means.
func startHint(err error) string {
	text := strings.ToLower(err.Error())
	switch {
	case errors.Is(err, plugin.ErrChecksumsDoNotMatch):
		return "the binary does not match the sha256 in the config; rebuild or update the checksum"
	case strings.Contains(text, "incompatible api version"), strings.Contains(text, "incompatible core api version"):
		return fmt.Sprintf("it speaks another protocol version than this host (dsh protocol %d); rebuild it against this dsh's sdk", sdk.ProtocolVersion)
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

// current returns the live client, or nil while the plugin is down.
func (r *remote) current() pluginv1.PluginClient {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.client == nil || r.client.Exited() {
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
func (r *remote) call(ctx stdctx.Context, event, scope string, payload []byte, next func(stdctx.Context, []byte) ([]byte, error)) ([]byte, error) {
	rpc := r.current()
	if rpc == nil {
		if r.entry.OnUnavailable == "skip" {
			return nil, errSkip
		}
		return nil, errs.New(PluginCrashed, fmt.Sprintf("plugin %q (%s) is not running", r.entry.ID, r.entry.Exec)).WithReason(ReasonUnavailable)
	}
	if r.entry.Timeout > 0 {
		var cancel stdctx.CancelFunc
		ctx, cancel = stdctx.WithTimeout(ctx, r.entry.Timeout)
		defer cancel()
	}
	cctx, cancel := stdctx.WithCancel(ctx)
	defer cancel()
	stream, err := rpc.Call(cctx)
	if err != nil {
		return nil, r.callError(ctx, err)
	}
	if err := stream.Send(&pluginv1.HostMessage{Msg: &pluginv1.HostMessage_Start{Start: &pluginv1.CallStart{Event: event, PayloadJson: payload, ScopeTag: scope}}}); err != nil {
		return nil, r.callError(ctx, err)
	}
	// Receiving on this goroutine rather than on a reader goroutine saves
	// two goroutine hand-offs per call (about 8% of a call's latency here;
	// waking goroutines on other threads is what a call mostly waits for).
	// A cancelled cctx ends a pending Recv.
	msg, err := stream.Recv()
	if err != nil {
		return nil, r.callError(ctx, err)
	}
	if req := msg.GetNext(); req != nil {
		var replaced []byte
		if req.ReplacePayload {
			replaced = req.PayloadJson
		}
		if msg, err = r.runNext(cctx, cancel, stream, replaced, next); err != nil {
			return nil, r.callError(ctx, err)
		}
		if msg.GetNext() != nil {
			return nil, r.protocolError("it asked for next twice in one call of %s", event)
		}
	}
	res := msg.GetResult()
	if res == nil {
		return nil, r.protocolError("it sent an unknown message during %s", event)
	}
	if res.Error != nil {
		return nil, sdk.ErrorFromProto(res.Error)
	}
	return res.ResultJson, nil
}

// watchAfter is how long next runs before the host starts watching the
// stream for a plugin that stops waiting. Almost every next ends sooner, and
// those calls then need no second goroutine; a plugin that gives up on a
// longer next is noticed at most this late.
const watchAfter = time.Millisecond

// runNext runs the rest of the chain for the plugin, answers it, and
// returns the plugin's next message. Anything the plugin sends while next
// runs means it no longer waits: next is cancelled and that message is
// returned instead of sending the answer nobody reads.
func (r *remote) runNext(cctx stdctx.Context, endCall stdctx.CancelFunc, stream pluginv1.Plugin_CallClient, payload []byte, next func(stdctx.Context, []byte) ([]byte, error)) (*pluginv1.PluginMessage, error) {
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
func answerNext(stream pluginv1.Plugin_CallClient, out []byte, err error) {
	res := &pluginv1.NextResult{ResultJson: out, Error: sdk.ErrorToProto(err)}
	_ = stream.Send(&pluginv1.HostMessage{Msg: &pluginv1.HostMessage_NextResult{NextResult: res}})
}

// callError explains why a call's stream failed.
func (r *remote) callError(ctx stdctx.Context, err error) error {
	// The deadline travels with the call, so the plugin's side may end the
	// stream a moment before the host's own timer fires.
	timedOut := errors.Is(ctx.Err(), stdctx.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded
	if timedOut && r.entry.Timeout > 0 {
		return errs.New(PluginTimeout, fmt.Sprintf("plugin %q (%s) did not answer within %s", r.entry.ID, r.entry.Exec, r.entry.Timeout))
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	r.mu.Lock()
	exited := r.client != nil && r.client.Exited()
	r.mu.Unlock()
	if exited {
		return errs.Wrap(PluginCrashed, err, fmt.Sprintf("plugin %q (%s) exited during the call", r.entry.ID, r.entry.Exec))
	}
	return errs.Wrap(PluginCrashed, err, fmt.Sprintf("the call to plugin %q (%s) failed", r.entry.ID, r.entry.Exec))
}

// supervise restarts the process when it exits, with exponential backoff,
// until the entry's restart limit.
func (r *remote) supervise() {
	defer close(r.down)
	backoff := 100 * time.Millisecond
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-tick.C:
		}
		r.mu.Lock()
		exited := r.client != nil && r.client.Exited()
		limit := r.entry.MaxRestarts
		switch {
		case limit == 0:
			limit = 5
		case limit < 0:
			limit = 0 // -1: never restart
		}
		giveUp := r.restarts >= limit
		r.mu.Unlock()
		if !exited {
			continue
		}
		if giveUp {
			r.log.Error("plugin exited and reached its restart limit; it stays down", "restarts", limit)
			return
		}
		r.log.Warn("plugin exited; restarting", "in", backoff)
		select {
		case <-r.stop:
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
		r.mu.Lock()
		r.restarts++
		old := r.client
		r.mu.Unlock()
		old.Kill()
		if _, err := r.start(stdctx.Background()); err != nil {
			r.log.Error("plugin restart failed", "error", err)
			r.mu.Lock()
			r.client = old // still exited: the next tick tries again
			r.mu.Unlock()
		}
	}
}

// close stops the supervisor and the process.
func (r *remote) close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	close(r.stop)
	<-r.down
	<-r.emitDone
	r.mu.Lock()
	client := r.client
	r.mu.Unlock()
	if client != nil {
		client.Kill()
	}
}
