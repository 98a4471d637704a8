package execplugin

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// A plugin that accepts sdk.Mux gets its waterfall calls, tool calls and
// batches of notifications on one stream per process instead of an RPC each: an RPC's setup (HTTP/2
// stream, headers, the server's goroutine) is most of what a small call
// costs. Frames carry the call's id; one reader goroutine hands each to
// its call. A call in flight can still make nested calls back: the
// plugin's NextRequest arrives as a frame, next runs on the caller's
// goroutine, and calls next makes into the same plugin travel as frames of
// their own while this one waits.

// muxClient is the host's side of one process's Mux stream.
type muxClient struct {
	stream pluginv1.Plugin_MuxClient
	end    stdctx.CancelFunc // ends the stream
	// sending is held by the one Send a gRPC stream takes at a time;
	// waiting for it is bounded by each call's ctx, so a plugin that
	// stops reading (its window full) holds up one send, not every
	// caller past its deadline.
	sending chan struct{}
	done    chan struct{} // closed when the reader stopped; err says why
	// stalled is the error of the calls in flight when a send outlived
	// its caller's ctx and the stream was torn down for it.
	stalled func() error
	// cancels are the cancel frames still being sent, which close waits
	// for.
	cancels sync.WaitGroup

	// stalledAt is when a stall tore the stream down (unix nanoseconds,
	// 0: it did not): the host opens another stream after a while.
	stalledAt atomic.Int64

	mu     sync.Mutex
	calls  map[uint64]*muxCall
	lastID uint64
	err    error
}

// muxCall is one call in flight on the stream.
type muxCall struct {
	id uint64
	// in gets the plugin's frames for the call: a NextRequest, then its
	// result, at most two that matter; the reader never waits on it.
	in chan *pluginv1.MuxPluginFrame
	// interrupt, set while next runs, cancels next: a frame arriving then
	// means the plugin stopped waiting for it.
	interrupt stdctx.CancelFunc
}

// MaxMuxFrame bounds one frame of the Mux stream, either way.
const MaxMuxFrame = 64 << 20

// errMuxBroken is a stream that ended before the call was sent: the call
// takes the RPC of its own instead, which says whether the plugin is down.
var errMuxBroken = errors.New("the plugin's call stream ended")

// openMux opens the stream of a process that accepts it; nil when it
// cannot, and calls then take the RPCs of their own. stalled says why the
// calls in flight failed when a blocked send made the host tear the stream
// down.
func openMux(rpc pluginv1.PluginClient, stalled func() error) *muxClient {
	ctx, end := stdctx.WithCancel(stdctx.Background())
	// One frame too large for gRPC's default 4 MB would end the stream
	// and every call on it, not just its own: the stream takes what a
	// plugin's answer may reasonably be (the SDK's server does the same).
	stream, err := rpc.Mux(ctx, grpc.MaxCallRecvMsgSize(MaxMuxFrame))
	if err != nil {
		end()
		return nil
	}
	m := &muxClient{stream: stream, end: end, sending: make(chan struct{}, 1), done: make(chan struct{}), calls: map[uint64]*muxCall{}, stalled: stalled}
	go m.read()
	return m
}

// close ends the stream and waits for its reader; calls in flight fail as
// they would on a process that died.
func (m *muxClient) close() {
	if m == nil {
		return
	}
	m.end()
	<-m.done
	m.cancels.Wait()
}

// read hands each frame to its call until the stream ends.
func (m *muxClient) read() {
	defer close(m.done)
	for {
		f, err := m.stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) || status.Code(err) == codes.Canceled {
				// The plugin ended the stream, or the host did: either
				// way the transport is gone for these calls.
				err = status.Error(codes.Unavailable, "the plugin's call stream ended: "+err.Error())
			}
			m.mu.Lock()
			if m.err == nil { // a stall tore it down: that is why
				m.err = err
			}
			// The rest of a chain the plugin asked for serves nobody now:
			// stop it, as a call's own stream ending does.
			for _, c := range m.calls {
				if c.interrupt != nil {
					c.interrupt()
				}
			}
			m.mu.Unlock()
			return
		}
		m.mu.Lock()
		if c := m.calls[f.Id]; c != nil {
			// Under mu, so runNext sees either the frame or interrupt
			// set, never neither.
			select {
			case c.in <- f:
			default: // more than the protocol allows; the call has what it needs
			}
			if c.interrupt != nil {
				c.interrupt()
			}
		}
		m.mu.Unlock()
	}
}

// broken is why the stream ended, or nil while it serves.
func (m *muxClient) broken() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// begin registers a call and sends its first frame, bounded by ctx's
// deadline and carrying its outgoing metadata (the trace context).
// errMuxBroken means the call never left.
func (m *muxClient) begin(ctx stdctx.Context, f *pluginv1.MuxHostFrame) (*muxCall, error) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return nil, errMuxBroken
	}
	m.lastID++
	c := &muxCall{id: m.lastID, in: make(chan *pluginv1.MuxPluginFrame, 2)}
	m.calls[c.id] = c
	m.mu.Unlock()
	f.Id = c.id
	if dl, ok := ctx.Deadline(); ok {
		f.TimeoutUs = max(time.Until(dl).Microseconds(), 1)
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		f.Metadata = make(map[string]string, len(md))
		for k, v := range md {
			if len(v) > 0 {
				f.Metadata[k] = v[0]
			}
		}
	}
	if err := m.send(ctx, f); err != nil {
		m.forget(c)
		if ctx.Err() != nil {
			// Out of time waiting to send: as gRPC reports an RPC whose
			// ctx ended.
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, errMuxBroken
	}
	return c, nil
}

// send sends f once the stream is free, unless ctx or the stream ends
// first. A Send that gRPC holds up (the plugin reads nothing, so its
// flow-control window stays full) past ctx, and stallGrace after, cannot
// be taken back — the frame may be half written — so the stream is torn
// down, which ends that Send: every call on the stream fails with
// m.stalled's error, and later calls take RPCs of their own, each bounded
// by its ctx. A writer goroutine taking over every send would spare the
// other calls, but costs every call a wake-up, and a plugin that reads
// nothing serves them no better.
func (m *muxClient) send(ctx stdctx.Context, f *pluginv1.MuxHostFrame) error {
	select {
	case m.sending <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-m.done:
		return errMuxBroken
	}
	defer func() { <-m.sending }()
	if err := ctx.Err(); err != nil {
		// Both were ready and select took the stream: nobody waits for
		// this frame any more.
		return err
	}
	if ctx.Done() == nil {
		return m.stream.Send(f)
	}
	var inSend atomic.Bool
	inSend.Store(true)
	stop := stdctx.AfterFunc(ctx, func() {
		// A Send that is merely running when ctx ends (microseconds,
		// unless gRPC holds it) must not cost the stream.
		time.AfterFunc(stallGrace, func() {
			if inSend.Load() {
				m.stall()
			}
		})
	})
	err := m.stream.Send(f)
	inSend.Store(false)
	stop()
	if err != nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// stallGrace is how long a Send may still run after its caller's ctx
// ended before the stream is torn down for it.
const stallGrace = 20 * time.Millisecond

// stall tears the stream down for a send that outlived its caller.
func (m *muxClient) stall() {
	m.mu.Lock()
	if m.err == nil {
		m.err = m.stalled()
	}
	m.mu.Unlock()
	m.stalledAt.CompareAndSwap(0, time.Now().UnixNano())
	m.end()
}

// A stream a stall tore down is opened again once the plugin may have
// gone on (a pause, a burst), after a wait that doubles with each stall of
// the same process; a plugin that is really stuck fails its health check
// meanwhile and is restarted with a stream of its own.
const (
	muxReopenFirst = time.Second
	muxReopenMax   = time.Minute
)

// reopenWait is how long after its stalls'th stall a stream waits to be
// opened again.
func reopenWait(stalls int) time.Duration {
	return min(muxReopenFirst<<min(stalls, 6), muxReopenMax)
}

// cancelWait bounds the wait to send a cancel frame: a plugin that reads
// nothing gets none, and its health check ends it.
const cancelWait = time.Second

func (m *muxClient) forget(c *muxCall) {
	m.mu.Lock()
	delete(m.calls, c.id)
	m.mu.Unlock()
}

// finish ends a call; one that did not get its result is cancelled on the
// plugin's side with a cancel frame, and the stream goes on. The frame
// is sent from a goroutine of its own, so the caller, already past its
// ctx, does not wait for a stream that is busy.
func (m *muxClient) finish(c *muxCall, answered bool) {
	m.forget(c)
	if answered {
		return
	}
	m.mu.Lock()
	if m.err != nil { // ended: the plugin's side cancelled everything
		m.mu.Unlock()
		return
	}
	// Under mu: close waits for these only after the reader set err.
	m.cancels.Add(1)
	m.mu.Unlock()
	go func() {
		defer m.cancels.Done()
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), cancelWait)
		defer cancel()
		_ = m.send(ctx, &pluginv1.MuxHostFrame{Id: c.id, Msg: &pluginv1.MuxHostFrame_Cancel{Cancel: &pluginv1.MuxCancel{}}})
	}()
}

// recv waits for the call's next frame, the end of ctx, or the stream's.
func (m *muxClient) recv(ctx stdctx.Context, c *muxCall) (*pluginv1.MuxPluginFrame, error) {
	select {
	case f := <-c.in:
		return f, nil
	default:
	}
	select {
	case f := <-c.in:
		return f, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-m.done:
		select {
		case f := <-c.in: // it arrived just before the end
			return f, nil
		default:
		}
		return nil, m.broken()
	}
}

// stallError is the error of the calls in flight on a stream the host tore
// down because a send to the plugin outlived its caller; it asks for a
// health check, which restarts a plugin that is stuck.
func (r *remote) stallError() error {
	r.probeSoon()
	return errs.New(PluginStalled, fmt.Sprintf(
		"plugin %q (%s) stopped reading its call stream: a send to it waited past its caller's deadline, so dsh closed the stream and the calls on it; later calls take a connection each until a new stream is opened (after a second, doubling with each stall) or the plugin is restarted",
		r.entry.ID, r.entry.Exec))
}

// currentMux returns the live process's stream, or nil while the plugin is
// down, failed its health check, or takes its calls as RPCs. A stream a
// stall tore down is replaced by a new one once its wait is over.
func (r *remote) currentMux() *muxClient {
	r.mu.Lock()
	if r.proc.mux == nil || r.proc.client == nil || r.proc.client.Exited() || r.stuck != nil {
		r.mu.Unlock()
		return nil
	}
	m := r.proc.mux
	at := m.stalledAt.Load()
	if at == 0 || r.rpc == nil || time.Since(time.Unix(0, at)) < reopenWait(r.muxStalls) {
		r.mu.Unlock()
		return m
	}
	fresh := openMux(r.rpc, r.stallError)
	if fresh == nil {
		r.mu.Unlock()
		return m // calls take RPCs of their own until the next try
	}
	r.muxStalls++
	r.proc.mux = fresh
	stalls := r.muxStalls
	r.mu.Unlock()
	// Its stream ended with the stall: the reader and the cancel frames
	// are gone or going at once.
	m.close()
	r.log.Debug("plugin call stream opened again after a stall", "plugin", r.entry.ID, "stalls", stalls)
	return fresh
}

// callMux is callRPC on the stream. errMuxBroken means the call never
// reached the plugin.
func (r *remote) callMux(ctx stdctx.Context, m *muxClient, own time.Time, event, scope string, payload *pluginv1.Payload, next func(stdctx.Context, *pluginv1.Payload) (*pluginv1.Result, error)) (*pluginv1.Result, error) {
	c, err := m.begin(ctx, &pluginv1.MuxHostFrame{Msg: &pluginv1.MuxHostFrame_Call{Call: &pluginv1.HostMessage{
		Msg: &pluginv1.HostMessage_Start{Start: &pluginv1.CallStart{Event: event, Payload: payload, ScopeTag: scope}}}}})
	if errors.Is(err, errMuxBroken) {
		return nil, err
	}
	if err != nil {
		return nil, r.callError(ctx, own, err)
	}
	answered := false
	defer func() { m.finish(c, answered) }()
	f, err := m.recv(ctx, c)
	if err != nil {
		return nil, r.callError(ctx, own, err)
	}
	msg := f.GetCall()
	if req := msg.GetNext(); req != nil {
		if f, err = r.runNextMux(ctx, m, c, req.Payload, next); err != nil {
			return nil, r.callError(ctx, own, err)
		}
		if msg = f.GetCall(); msg.GetNext() != nil {
			return nil, r.protocolError("it asked for next twice in one call of %s", event)
		}
	}
	answered = true
	return r.callResult(ctx, own, event, msg)
}

// runNextMux runs the rest of the chain for the plugin on this goroutine,
// answers it, and returns its next frame. A frame that arrives while next
// runs means the plugin no longer waits: next is cancelled and that frame
// returned, as runNext does on a stream of its own.
func (r *remote) runNextMux(ctx stdctx.Context, m *muxClient, c *muxCall, payload *pluginv1.Payload, next func(stdctx.Context, *pluginv1.Payload) (*pluginv1.Result, error)) (*pluginv1.MuxPluginFrame, error) {
	nctx, cancel := stdctx.WithCancel(ctx)
	defer cancel()
	m.mu.Lock()
	if len(c.in) > 0 || m.err != nil {
		cancel()
	}
	c.interrupt = cancel
	m.mu.Unlock()
	out, err := next(nctx, payload)
	m.mu.Lock()
	c.interrupt = nil
	gaveUp := len(c.in) > 0
	m.mu.Unlock()
	if !gaveUp {
		// A send that fails means the stream ended, which recv reports.
		_ = m.send(ctx, &pluginv1.MuxHostFrame{Id: c.id, Msg: &pluginv1.MuxHostFrame_Call{Call: &pluginv1.HostMessage{
			Msg: &pluginv1.HostMessage_NextResult{NextResult: nextResult(out, err)}}}})
	}
	return m.recv(ctx, c)
}

// executeTool is ExecuteTool on the stream. errMuxBroken means the call
// never reached the plugin.
func (m *muxClient) executeTool(ctx stdctx.Context, inv *pluginv1.ToolInvocation) (*pluginv1.ToolOutcome, error) {
	f, err := m.roundTrip(ctx, &pluginv1.MuxHostFrame{Msg: &pluginv1.MuxHostFrame_Tool{Tool: inv}})
	return f.GetTool(), err
}

// emitBatch is EmitBatch on the stream, so a streamed answer's batches of
// chunks do not pay an RPC each. errMuxBroken means the batch never left.
func (m *muxClient) emitBatch(ctx stdctx.Context, req *pluginv1.EmitBatchRequest) (*pluginv1.EmitBatchResponse, error) {
	f, err := m.roundTrip(ctx, &pluginv1.MuxHostFrame{Msg: &pluginv1.MuxHostFrame_Emits{Emits: req}})
	return f.GetEmitted(), err
}

// roundTrip sends a call's one frame and waits for the plugin's one answer.
func (m *muxClient) roundTrip(ctx stdctx.Context, out *pluginv1.MuxHostFrame) (*pluginv1.MuxPluginFrame, error) {
	c, err := m.begin(ctx, out)
	if err != nil {
		return nil, err
	}
	f, err := m.recv(ctx, c)
	m.finish(c, err == nil)
	if err != nil {
		if ctx.Err() != nil {
			// As gRPC reports an RPC whose ctx ended.
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, err
	}
	return f, nil
}
