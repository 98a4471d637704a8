package sdk

import (
	stdctx "context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Mux is the feature a plugin accepts (DescribeResponse.accepts) to get its
// waterfall calls, tool calls and batches of notifications on one stream (the Mux RPC) instead of an RPC
// each; every plugin built with this SDK does. A host without it uses the
// RPCs of their own.
const Mux = "mux"

// WithoutMux returns srv declining the Mux stream: its Describe no longer
// accepts Mux, so dsh (and sdktest) send it every call as an RPC of its
// own, and its Mux is unimplemented. A server that wraps Server() to see
// or change calls — overriding Call, ExecuteTool, Emit or EmitBatch — needs
// it: calls on the stream go to the SDK's handlers directly, past the
// wrapper's methods. Each call then costs an RPC of its own (see
// BENCHMARKS.md); a listener or tool handler of the Plugin sees every call
// on either path and costs nothing.
func WithoutMux(srv pluginv1.PluginServer) pluginv1.PluginServer { return withoutMux{srv} }

type withoutMux struct{ pluginv1.PluginServer }

func (w withoutMux) Describe(ctx stdctx.Context, req *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	d, err := w.PluginServer.Describe(ctx, req)
	if d != nil {
		d.Accepts = slices.DeleteFunc(slices.Clone(d.Accepts), func(f string) bool { return f == Mux })
	}
	return d, err
}

func (withoutMux) Mux(pluginv1.Plugin_MuxServer) error {
	return status.Error(codes.Unimplemented, "this plugin takes its calls as RPCs of their own (sdk.WithoutMux)")
}

// Mux implements the protocol: a call on the stream holds up no other, as
// an RPC of its own would not. Most calls are short (a tool, a batch of
// notifications, a check that decides alone), and starting a goroutine
// for each costs a wake-up of its own, so the goroutine reading the
// stream runs each call itself and hands reading over to a new goroutine
// only when the call waits: when it calls next (whose answer comes on the
// stream) or runs past inlineFor. It returns once the stream ended and
// every call on it returned.
func (s *server) Mux(stream pluginv1.Plugin_MuxServer) error {
	m := &muxServer{s: s, stream: stream, calls: map[uint64]*muxCall{}, ended: make(chan struct{})}
	defer m.wg.Wait()
	defer m.cancelAll()
	m.read()
	<-m.ended
	return nil
}

// inlineFor is how long a call runs on the goroutine reading the stream
// before reading moves to a new goroutine; the frames behind it wait at
// most this long.
const inlineFor = 100 * time.Microsecond

// read reads and serves frames until the stream ends or a call it runs
// handed reading over to another goroutine.
func (m *muxServer) read() {
	for {
		f, err := m.stream.Recv()
		if err != nil {
			// The host ended the stream (it stops, or the process is
			// being replaced): every call on it ends with it, the one
			// Mux's own goroutine may be running included.
			m.endOnce.Do(func() {
				m.cancelAll()
				close(m.ended)
			})
			return
		}
		if !m.serve(f) {
			return
		}
	}
}

// serve handles one frame; false means reading moved to another goroutine
// while a call ran on this one.
func (m *muxServer) serve(f *pluginv1.MuxHostFrame) bool {
	s := m.s
	switch x := f.Msg.(type) {
	case *pluginv1.MuxHostFrame_Call:
		if start := x.Call.GetStart(); start != nil {
			return m.start(f, func(ctx stdctx.Context, c *muxCall) *pluginv1.MuxPluginFrame {
				res := s.run(ctx, start, c.next(m, start.Event))
				return &pluginv1.MuxPluginFrame{Id: f.Id, Msg: &pluginv1.MuxPluginFrame_Call{Call: &pluginv1.PluginMessage{
					Msg: &pluginv1.PluginMessage_Result{Result: res}}}}
			})
		} else if res := x.Call.GetNextResult(); res != nil {
			if c := m.get(f.Id); c != nil {
				select {
				case c.answer <- res:
				default: // a second answer to one next: nobody waits for it
				}
			}
		}
	case *pluginv1.MuxHostFrame_Tool:
		inv := x.Tool
		return m.start(f, func(ctx stdctx.Context, _ *muxCall) *pluginv1.MuxPluginFrame {
			out, _ := s.ExecuteTool(ctx, inv) // its error is always nil
			return &pluginv1.MuxPluginFrame{Id: f.Id, Msg: &pluginv1.MuxPluginFrame_Tool{Tool: out}}
		})
	case *pluginv1.MuxHostFrame_Emits:
		req := x.Emits
		return m.start(f, func(ctx stdctx.Context, _ *muxCall) *pluginv1.MuxPluginFrame {
			out, err := s.EmitBatch(ctx, req)
			if err != nil {
				// Only a cancelled batch fails as a whole, and the
				// host reads nothing more of it then.
				out = &pluginv1.EmitBatchResponse{}
			}
			return &pluginv1.MuxPluginFrame{Id: f.Id, Msg: &pluginv1.MuxPluginFrame_Emitted{Emitted: out}}
		})
	case *pluginv1.MuxHostFrame_Cancel:
		if c := m.get(f.Id); c != nil {
			c.dropped.Store(true)
			c.cancel()
		}
	}
	return true
}

// muxServer is the plugin's side of one Mux stream.
type muxServer struct {
	s      *server
	stream pluginv1.Plugin_MuxServer
	sendMu sync.Mutex // a gRPC stream takes one Send at a time
	mu     sync.Mutex
	calls  map[uint64]*muxCall
	// wg counts the goroutines reading handed over to.
	wg      sync.WaitGroup
	ended   chan struct{} // closed once a read saw the stream end
	endOnce sync.Once
}

// muxCall is one call in flight on the stream.
type muxCall struct {
	id     uint64
	ctx    stdctx.Context
	cancel stdctx.CancelFunc
	// dropped: the host cancelled the call and reads nothing more of it.
	dropped atomic.Bool
	// answer gets the host's NextResult; one at most is awaited.
	answer chan *pluginv1.NextResult
	// reading: 0 while the call runs on the goroutine that reads the
	// stream, 1 once it returned there, 2 once reading moved on.
	reading atomic.Int32
}

// handOver moves reading to a new goroutine, unless the call already
// returned or handed it over.
func (c *muxCall) handOver(m *muxServer) {
	if c.reading.CompareAndSwap(0, 2) {
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.read()
		}()
	}
}

// start runs one call on this goroutine, under a context that ends with
// the stream, a cancel frame or the host's timeout, and carries the
// frame's metadata where an RPC's would be (Traceparent reads it there).
// It returns whether this goroutine still reads the stream.
func (m *muxServer) start(f *pluginv1.MuxHostFrame, run func(stdctx.Context, *muxCall) *pluginv1.MuxPluginFrame) bool {
	ctx, cancel := stdctx.WithCancel(m.stream.Context())
	if f.TimeoutUs > 0 {
		ctx, cancel = withTimeout(ctx, cancel, time.Duration(f.TimeoutUs)*time.Microsecond)
	}
	if len(f.Metadata) > 0 {
		ctx = metadata.NewIncomingContext(ctx, metadata.New(f.Metadata))
	}
	c := &muxCall{id: f.Id, ctx: ctx, cancel: cancel, answer: make(chan *pluginv1.NextResult, 1)}
	m.mu.Lock()
	if old := m.calls[f.Id]; old != nil {
		// The host never reuses a live id; were it to, the older call
		// could no longer be told apart, so it ends.
		old.cancel()
	}
	m.calls[f.Id] = c
	m.mu.Unlock()
	slow := time.AfterFunc(inlineFor, func() { c.handOver(m) })
	out := run(ctx, c)
	slow.Stop()
	m.mu.Lock()
	if m.calls[f.Id] == c {
		delete(m.calls, f.Id)
	}
	m.mu.Unlock()
	cancel()
	if !c.dropped.Load() {
		// After a cancel frame the answer would only cost a message.
		_ = m.send(out)
	}
	return c.reading.CompareAndSwap(0, 1)
}

// withTimeout bounds ctx, keeping one cancel for both.
func withTimeout(ctx stdctx.Context, outer stdctx.CancelFunc, d time.Duration) (stdctx.Context, stdctx.CancelFunc) {
	ctx, inner := stdctx.WithTimeout(ctx, d)
	return ctx, func() { inner(); outer() }
}

func (m *muxServer) get(id uint64) *muxCall {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[id]
}

func (m *muxServer) cancelAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.calls {
		c.cancel()
	}
}

// send writes one frame; an error means the stream ended, which the loop
// in Mux notices on its own.
func (m *muxServer) send(f *pluginv1.MuxPluginFrame) error {
	m.sendMu.Lock()
	defer m.sendMu.Unlock()
	return m.stream.Send(f)
}

// next is the Next of a call on the stream: it asks the host and waits for
// its answer, the call's end, or the stream's.
func (c *muxCall) next(m *muxServer, event string) Next {
	used := false
	return func(ctx stdctx.Context, payload *pluginv1.Payload) (*pluginv1.Result, error) {
		if used {
			return nil, errs.New(errs.NextMisuse, fmt.Sprintf("next of %q was called twice by plugin %s", event, m.s.p.name))
		}
		used = true
		// The answer comes on the stream, which this goroutine may be
		// the one to read.
		c.handOver(m)
		err := m.send(&pluginv1.MuxPluginFrame{Id: c.id, Msg: &pluginv1.MuxPluginFrame_Call{Call: &pluginv1.PluginMessage{
			Msg: &pluginv1.PluginMessage_Next{Next: &pluginv1.NextRequest{Payload: payload}}}}})
		if err != nil {
			return nil, err
		}
		select {
		case res := <-c.answer:
			return nextOutcome(res)
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.ctx.Done():
			return nil, c.ctx.Err()
		}
	}
}
