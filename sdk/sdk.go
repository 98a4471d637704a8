package sdk

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/internal/hostwatch"
	"github.com/dsh-go/dsh/sdk/internal/nodump"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Call is one waterfall invocation as the plugin sees it.
type Call struct {
	Event string
	// Payload holds the event's payload in the field named after the
	// event (GetAdmission, GetToolExecution, …).
	Payload *pluginv1.Payload
	// Scope is the agent id the event is about ("" outside any agent).
	Scope string
}

// Next runs the rest of the host's chain, other plugins included, and
// returns its result. A nil payload passes the original one on. Call it at
// most once.
type Next func(ctx stdctx.Context, payload *pluginv1.Payload) (*pluginv1.Result, error)

// WaterfallFunc handles a waterfall event. ctx ends when the host's
// dispatch is cancelled; returning early cancels a next still running.
type WaterfallFunc func(ctx stdctx.Context, call Call, next Next) (*pluginv1.Result, error)

// EmitFunc handles a notification.
type EmitFunc func(ctx stdctx.Context, call Call) error

// Option changes how a listener is registered.
type Option func(*pluginv1.Listener)

// Prepend puts the listener before those the host registered earlier.
func Prepend() Option { return func(l *pluginv1.Listener) { l.Prepend = true } }

// Plugin is a plugin binary under construction.
type Plugin struct {
	name, version string
	listeners     []*pluginv1.Listener
	waterfalls    map[string]WaterfallFunc
	emits         map[string]EmitFunc
	configure     func(config json.RawMessage) error
	requires      []string
	hostCaps      atomic.Value // []string, from Describe
	tools         []*pluginv1.ToolDecl
	toolFns       map[string]ToolHandler
	// Logger writes to the host, which re-logs each line with the
	// plugin's id.
	Logger hclog.Logger
}

// New starts a plugin named name.
func New(name, version string) *Plugin {
	return &Plugin{
		name: name, version: version,
		waterfalls: map[string]WaterfallFunc{}, emits: map[string]EmitFunc{},
		Logger: hclog.New(&hclog.LoggerOptions{Name: name, Output: os.Stderr, JSONFormat: true, Level: hclog.Trace}),
	}
}

// Waterfall listens to a waterfall event.
func (p *Plugin) Waterfall(event string, fn WaterfallFunc, opts ...Option) {
	l := &pluginv1.Listener{Event: event, Kind: pluginv1.Kind_KIND_WATERFALL}
	for _, o := range opts {
		o(l)
	}
	p.listeners = append(p.listeners, l)
	p.waterfalls[event] = fn
}

// Emit listens to a notification.
func (p *Plugin) Emit(event string, fn EmitFunc) {
	p.listeners = append(p.listeners, &pluginv1.Listener{Event: event, Kind: pluginv1.Kind_KIND_EMIT})
	p.emits[event] = fn
}

// OnConfigure receives the config entry's config (a JSON object) before
// any event; an error fails the plugin's fiber in the host.
func (p *Plugin) OnConfigure(fn func(config json.RawMessage) error) { p.configure = fn }

// Serve runs the plugin until the host stops it. Run directly instead of by
// a dsh host, it says so and exits.
func (p *Plugin) Serve() {
	// The plugin's key and config must not be readable by the other
	// processes of its user; a failure leaves it as it was, so it is
	// logged, not fatal.
	if err := nodump.Seal(); err != nil {
		p.Logger.Warn("cannot mark the plugin non-dumpable; processes of its user may read its memory", "error", err)
	}
	// Started by dsh, the plugin's whole process group dies with dsh,
	// even when dsh is SIGKILLed: children the plugin started included.
	hostwatch.Watch(hostwatch.KillOwnGroup)
	plugin.Serve(&plugin.ServeConfig{
		HandshakeConfig:  Handshake,
		VersionedPlugins: VersionedPlugins(&server{p: p}),
		GRPCServer:       GRPCServer,
		Logger:           p.Logger,
	})
}

// GRPCServer is the gRPC server a plugin serves on, for a plugin that calls
// go-plugin's Serve itself. Its flow-control window is fixed, which turns
// off gRPC's bandwidth estimator: on the loopback connection to dsh it
// measures nothing and costs a ping, a write and a wake-up per message
// exchange.
func GRPCServer(opts []grpc.ServerOption) *grpc.Server {
	const window = 1 << 20
	// The host's frames on the Mux stream may be larger than gRPC's
	// default 4 MB (a large tool input); one refused would end the stream
	// and every call on it. The host bounds its side alike.
	const maxFrame = 64 << 20
	return grpc.NewServer(append(opts, grpc.InitialWindowSize(window), grpc.InitialConnWindowSize(window), grpc.MaxRecvMsgSize(maxFrame))...)
}

// server answers the protocol for a Plugin.
type server struct {
	pluginv1.UnimplementedPluginServer
	p *Plugin
}

// Server returns the protocol server of p, for a test that serves it on a
// gRPC server of its own; sdktest.Start does that and plays the host. A
// server wrapping it to see or change calls does not see those that arrive
// on the Mux stream, which dsh uses for every Go plugin: wrap it in
// WithoutMux too.
func (p *Plugin) Server() pluginv1.PluginServer { return &server{p: p} }

// Describe implements the protocol.
func (s *server) Describe(_ stdctx.Context, req *pluginv1.DescribeRequest) (*pluginv1.DescribeResponse, error) {
	p := s.p
	p.hostCaps.Store(slices.Clone(req.GetCapabilities()))
	return &pluginv1.DescribeResponse{Name: p.name, Version: p.version, Listeners: p.listeners,
		Requires: p.requires, Accepts: []string{EmitBatch, Mux}, Tools: p.tools, Sdk: sdkName}, nil
}

// Configure implements the protocol.
func (s *server) Configure(_ stdctx.Context, req *pluginv1.ConfigureRequest) (*pluginv1.ConfigureResponse, error) {
	p := s.p
	if p.configure == nil {
		return &pluginv1.ConfigureResponse{}, nil
	}
	return &pluginv1.ConfigureResponse{Error: ErrorToProto(p.configure(req.ConfigJson))}, nil
}

// Emit implements the protocol.
func (s *server) Emit(ctx stdctx.Context, req *pluginv1.EmitRequest) (*pluginv1.EmitResponse, error) {
	return &pluginv1.EmitResponse{Error: ErrorToProto(s.emit(ctx, req))}, nil
}

// emit hands one notification to its listener.
func (s *server) emit(ctx stdctx.Context, req *pluginv1.EmitRequest) error {
	fn := s.p.emits[req.Event]
	if fn == nil {
		return errs.New(errs.InvalidArgument, "no listener for "+req.Event)
	}
	return fn(ctx, Call{Event: req.Event, Payload: req.Payload, Scope: req.ScopeTag})
}

// Call implements the protocol: one waterfall invocation on one stream.
func (s *server) Call(stream pluginv1.Plugin_CallServer) error {
	p := s.p
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "a call must begin with CallStart")
	}
	used := false
	next := func(ctx stdctx.Context, payload *pluginv1.Payload) (*pluginv1.Result, error) {
		if used {
			return nil, errs.New(errs.NextMisuse, fmt.Sprintf("next of %q was called twice by plugin %s", start.Event, p.name))
		}
		used = true
		msg := &pluginv1.NextRequest{Payload: payload}
		if err := stream.Send(&pluginv1.PluginMessage{Msg: &pluginv1.PluginMessage_Next{Next: msg}}); err != nil {
			return nil, err
		}
		in, err := stream.Recv()
		if err != nil {
			return nil, err
		}
		return nextOutcome(in.GetNextResult())
	}
	return stream.Send(&pluginv1.PluginMessage{Msg: &pluginv1.PluginMessage_Result{Result: s.run(stream.Context(), start, next)}})
}

// nextOutcome is what next returns for the host's answer.
func nextOutcome(res *pluginv1.NextResult) (*pluginv1.Result, error) {
	if res == nil {
		return nil, errs.New(errs.Internal, "the host answered next with something other than NextResult")
	}
	if res.Error != nil {
		return nil, ErrorFromProto(res.Error)
	}
	return res.Result, nil
}

// run runs the listener of one waterfall call, whichever way it arrived.
func (s *server) run(ctx stdctx.Context, start *pluginv1.CallStart, next Next) *pluginv1.CallResult {
	fn := s.p.waterfalls[start.Event]
	if fn == nil {
		return &pluginv1.CallResult{Error: ErrorToProto(errs.New(errs.InvalidArgument, fmt.Sprintf("plugin %s does not listen to %q", s.p.name, start.Event)))}
	}
	result, err := safeCall(fn, ctx, Call{Event: start.Event, Payload: start.Payload, Scope: start.ScopeTag}, next)
	if err != nil {
		result = nil
	}
	return &pluginv1.CallResult{Result: result, Error: ErrorToProto(err)}
}

// safeCall turns a handler's panic into an error, so one bad call does not
// take the plugin process down.
func safeCall(fn WaterfallFunc, ctx stdctx.Context, call Call, next Next) (out *pluginv1.Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errs.New(errs.ListenerFailed, fmt.Sprintf("plugin listener of %q panicked: %v", call.Event, r))
		}
	}()
	return fn(ctx, call, next)
}
