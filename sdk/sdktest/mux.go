package sdktest

import (
	stdctx "context"
	"sync"
	"time"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// dsh carries every call to a plugin that accepts sdk.Mux on one stream,
// so that is what a Host does too by default: a plugin's tests then run
// the path production runs (calls run on the goroutine reading the stream
// until they wait, the frames' ids, the stream's cancel frames), not only
// the RPC of its own that older or non-Go plugins get. WithRPCs tests that
// one.

// WithRPCs makes the Host send every call as an RPC of its own, as dsh does
// for a plugin that does not accept sdk.Mux (older SDKs, Python), instead
// of on the plugin's Mux stream.
func WithRPCs() Option { return func(o *options) { o.rpcs = true } }

// muxConn is the host's side of a plugin's Mux stream.
type muxConn struct {
	stream pluginv1.Plugin_MuxClient
	end    stdctx.CancelFunc
	done   chan struct{} // closed when the reader stopped; err says why

	sendMu sync.Mutex // a gRPC stream takes one Send at a time
	mu     sync.Mutex
	calls  map[uint64]chan *pluginv1.MuxPluginFrame
	lastID uint64
	err    error
}

// maxFrame is what dsh accepts in one frame (execplugin.MaxMuxFrame).
const maxFrame = 64 << 20

func openMux(rpc pluginv1.PluginClient) (*muxConn, error) {
	ctx, end := stdctx.WithCancel(stdctx.Background())
	stream, err := rpc.Mux(ctx, grpc.MaxCallRecvMsgSize(maxFrame))
	if err != nil {
		end()
		return nil, err
	}
	m := &muxConn{stream: stream, end: end, done: make(chan struct{}), calls: map[uint64]chan *pluginv1.MuxPluginFrame{}}
	go m.read()
	return m, nil
}

func (m *muxConn) close() {
	m.end()
	<-m.done
}

func (m *muxConn) read() {
	defer close(m.done)
	for {
		f, err := m.stream.Recv()
		m.mu.Lock()
		if err != nil {
			m.err = errs.Wrap(Protocol, err, "the plugin's Mux stream ended")
			m.mu.Unlock()
			return
		}
		if ch := m.calls[f.Id]; ch != nil {
			select {
			case ch <- f:
			default: // more frames than the protocol allows; call notices
			}
		}
		m.mu.Unlock()
	}
}

func (m *muxConn) send(f *pluginv1.MuxHostFrame) error {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	return m.stream.Send(f)
}

// muxCall is one call in flight on the stream.
type muxCall struct {
	m        *muxConn
	id       uint64
	in       chan *pluginv1.MuxPluginFrame
	answered bool
}

// begin sends a call's first frame with ctx's deadline and outgoing
// metadata, as dsh does.
func (m *muxConn) begin(ctx stdctx.Context, f *pluginv1.MuxHostFrame) (*muxCall, error) {
	m.mu.Lock()
	if m.err != nil {
		m.mu.Unlock()
		return nil, m.err
	}
	m.lastID++
	c := &muxCall{m: m, id: m.lastID, in: make(chan *pluginv1.MuxPluginFrame, 2)}
	m.calls[c.id] = c.in
	m.mu.Unlock()
	f.Id = c.id
	if dl, ok := ctx.Deadline(); ok {
		f.TimeoutUs = max(time.Until(dl).Microseconds(), 1)
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		f.Metadata = map[string]string{}
		for k, v := range md {
			if len(v) > 0 {
				f.Metadata[k] = v[0]
			}
		}
	}
	if err := m.send(f); err != nil {
		c.end()
		return nil, err
	}
	return c, nil
}

// recv waits for the call's next frame.
func (c *muxCall) recv(ctx stdctx.Context) (*pluginv1.MuxPluginFrame, error) {
	select {
	case f := <-c.in:
		return f, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.m.done:
		select {
		case f := <-c.in:
			return f, nil
		default:
		}
		c.m.mu.Lock()
		defer c.m.mu.Unlock()
		return nil, c.m.err
	}
}

// end forgets the call; one that got no answer is cancelled in the plugin
// with a cancel frame, as dsh does when its caller gives up.
func (c *muxCall) end() {
	c.m.mu.Lock()
	delete(c.m.calls, c.id)
	c.m.mu.Unlock()
	if !c.answered {
		_ = c.m.send(&pluginv1.MuxHostFrame{Id: c.id, Msg: &pluginv1.MuxHostFrame_Cancel{Cancel: &pluginv1.MuxCancel{}}})
	}
}

// roundTrip sends one frame and returns the plugin's one answer.
func (m *muxConn) roundTrip(ctx stdctx.Context, f *pluginv1.MuxHostFrame) (*pluginv1.MuxPluginFrame, error) {
	c, err := m.begin(ctx, f)
	if err != nil {
		return nil, err
	}
	defer c.end()
	in, err := c.recv(ctx)
	c.answered = err == nil
	return in, err
}

// callMux is Call on the stream.
func (h *Host) callMux(ctx stdctx.Context, event, scope string, payload *pluginv1.Payload, rest Rest) (*Called, error) {
	c, err := h.mux.begin(ctx, &pluginv1.MuxHostFrame{Msg: &pluginv1.MuxHostFrame_Call{Call: &pluginv1.HostMessage{
		Msg: &pluginv1.HostMessage_Start{Start: &pluginv1.CallStart{Event: event, Payload: payload, ScopeTag: scope}}}}})
	if err != nil {
		return nil, err
	}
	defer c.end()
	return h.answer(ctx, event, payload, rest, func() (*pluginv1.PluginMessage, error) {
		f, err := c.recv(ctx)
		if err != nil {
			return nil, err
		}
		if f.GetCall() == nil {
			return nil, errs.New(Protocol, "the plugin answered a "+event+" call with another kind of frame")
		}
		c.answered = f.GetCall().GetResult() != nil
		return f.GetCall(), nil
	}, func(res *pluginv1.NextResult) error {
		return h.mux.send(&pluginv1.MuxHostFrame{Id: c.id, Msg: &pluginv1.MuxHostFrame_Call{Call: &pluginv1.HostMessage{
			Msg: &pluginv1.HostMessage_NextResult{NextResult: res}}}})
	})
}

// executeTool is ExecuteTool on the stream.
func (h *Host) executeTool(ctx stdctx.Context, inv *pluginv1.ToolInvocation) (*pluginv1.ToolOutcome, error) {
	if h.mux == nil {
		return h.rpc.ExecuteTool(ctx, inv)
	}
	f, err := h.mux.roundTrip(ctx, &pluginv1.MuxHostFrame{Msg: &pluginv1.MuxHostFrame_Tool{Tool: inv}})
	if err != nil {
		return nil, err
	}
	if f.GetTool() == nil {
		return nil, errs.New(Protocol, "the plugin answered a tool call with another kind of frame")
	}
	return f.GetTool(), nil
}

// emit hands one notification over as dsh does: a batch of one on the
// stream, or the Emit RPC.
func (h *Host) emit(ctx stdctx.Context, req *pluginv1.EmitRequest) error {
	if h.mux == nil {
		res, err := h.rpc.Emit(ctx, req)
		if err != nil {
			return err
		}
		return sdk.ErrorFromProto(res.GetError())
	}
	f, err := h.mux.roundTrip(ctx, &pluginv1.MuxHostFrame{Msg: &pluginv1.MuxHostFrame_Emits{Emits: &pluginv1.EmitBatchRequest{Emits: []*pluginv1.EmitRequest{req}}}})
	if err != nil {
		return err
	}
	out := f.GetEmitted()
	if out == nil {
		return errs.New(Protocol, "the plugin answered a notification with another kind of frame")
	}
	for _, fail := range out.GetFailures() {
		if fail.GetIndex() == 0 {
			return sdk.ErrorFromProto(fail.GetError())
		}
	}
	return nil
}

// Mux reports whether the Host sends calls on the plugin's Mux stream, as
// dsh does for a plugin that accepts it, rather than as RPCs of their own.
func (h *Host) Mux() bool { return h.mux != nil }
