package sdktest

import (
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"sort"
	"testing"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/errs"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Codes of the failures sdktest itself reports, beside the plugin's own
// errors, which come back with the code the plugin gave them.
const (
	// StartFailed: the plugin could not be started, described or
	// configured.
	StartFailed errs.Code = "SDKTEST_START_FAILED"
	// Protocol: the plugin answered outside the protocol (no result, next
	// twice, a result of another event).
	Protocol errs.Code = "SDKTEST_PROTOCOL"
)

// Host is the host's side of one running plugin.
type Host struct {
	rpc      pluginv1.PluginClient
	mux      *muxConn // the plugin's Mux stream; nil: an RPC per call
	desc     *pluginv1.DescribeResponse
	protocol int
}

// Option changes how Start and Exec set the plugin up.
type Option func(*options)

type options struct {
	config       any
	entryID      string
	capabilities []string
	env          []string
	rpcs         bool
}

// WithConfig is the entry's config, sent with Configure as JSON (default:
// an empty object).
func WithConfig(config any) Option { return func(o *options) { o.config = config } }

// WithEntryID is the id of the config entry the plugin is told it runs
// under (default "test").
func WithEntryID(id string) Option { return func(o *options) { o.entryID = id } }

// WithCapabilities replaces what the host offers in Describe (default:
// Capabilities), to test a plugin against an older or smaller host.
func WithCapabilities(caps ...string) Option {
	return func(o *options) { o.capabilities = slices.Clone(caps) }
}

// WithEnv adds NAME=value pairs to a child's environment (Exec only).
func WithEnv(env ...string) Option { return func(o *options) { o.env = append(o.env, env...) } }

func collect(opts []Option) options {
	o := options{entryID: "test", capabilities: Capabilities()}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Capabilities is what sdktest offers a plugin in Describe: the events the
// Go SDK has typed listeners for and the features "tools", "emit-batch"
// and "mux". A dsh host offers at least these.
func Capabilities() []string {
	out := []string{"tools", sdk.EmitBatch, sdk.Mux, sdk.AdmissionEvent, sdk.ApprovalEvent, sdk.ToolEvent,
		sdk.StatusEvent, sdk.StreamChunkEvent, sdk.SessionEventEvent, sdk.SessionOutcomeEvent,
		sdk.ApprovalRequestedEvent, sdk.ApprovalAnsweredEvent}
	sort.Strings(out)
	return out
}

// Start serves p in this process on a loopback TCP port, over a real gRPC
// server, describes and configures it, and stops it when the test ends.
func Start(t testing.TB, p *sdk.Plugin, opts ...Option) *Host {
	t.Helper()
	o := collect(opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("sdktest: %v", errs.Wrap(StartFailed, err, "cannot listen on loopback for the plugin's gRPC server"))
	}
	// The server sdk.Serve runs on, with its window and frame limits.
	srv := sdk.GRPCServer(nil)
	pluginv1.RegisterPluginServer(srv, p.Server())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		srv.Stop()
		<-served
		t.Fatalf("sdktest: %v", errs.Wrap(StartFailed, err, "cannot connect to the plugin's gRPC server"))
	}
	t.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
		<-served
	})
	h := &Host{rpc: pluginv1.NewPluginClient(conn), protocol: sdk.ProtocolVersion}
	if err := h.setUp(t, o); err != nil {
		t.Fatalf("sdktest: %v", err)
	}
	return h
}

// setUp is what dsh does right after the handshake: Describe, then
// Configure with the entry's config, then open the Mux stream of a plugin
// that accepts it (closed when the test ends, before the connection).
func (h *Host) setUp(t testing.TB, o options) error {
	ctx := t.Context()
	desc, err := h.rpc.Describe(ctx, &pluginv1.DescribeRequest{ProtocolVersion: uint32(h.protocol), Capabilities: o.capabilities})
	if err != nil {
		return errs.Wrap(StartFailed, err, "Describe failed")
	}
	h.desc = desc
	config := []byte("{}")
	if o.config != nil {
		if config, err = json.Marshal(o.config); err != nil {
			return errs.Wrap(StartFailed, err, fmt.Sprintf("WithConfig(%T) cannot be sent as JSON", o.config))
		}
	}
	res, err := h.rpc.Configure(ctx, &pluginv1.ConfigureRequest{ConfigJson: config, EntryId: o.entryID})
	if err != nil {
		return errs.Wrap(StartFailed, err, "Configure failed")
	}
	if res.Error != nil {
		return errs.Wrap(errs.CodeOf(sdk.ErrorFromProto(res.Error)), sdk.ErrorFromProto(res.Error), "the plugin rejected its config")
	}
	if o.rpcs || !slices.Contains(desc.GetAccepts(), sdk.Mux) || !slices.Contains(o.capabilities, sdk.Mux) {
		return nil
	}
	if h.mux, err = openMux(h.rpc); err != nil {
		return errs.Wrap(StartFailed, err, "the plugin accepts mux but its Mux stream did not open")
	}
	t.Cleanup(h.mux.close)
	return nil
}

// Describe is what the plugin declared: name, version, listeners, tools,
// requirements, the SDK that built it.
func (h *Host) Describe() *pluginv1.DescribeResponse { return h.desc }

// Protocol is the dsh plugin protocol version the handshake agreed on.
func (h *Host) Protocol() int { return h.protocol }

// Client is the raw protocol client, for what the helpers do not cover.
func (h *Host) Client() pluginv1.PluginClient { return h.rpc }

// Tool returns the declaration of the tool named name, or nil.
func (h *Host) Tool(name string) *sdk.ToolDecl {
	for _, d := range h.desc.GetTools() {
		if d.GetName() == name {
			return d
		}
	}
	return nil
}

// Listens reports whether the plugin declared a listener for event.
func (h *Host) Listens(event string) bool {
	return slices.ContainsFunc(h.desc.GetListeners(), func(l *pluginv1.Listener) bool { return l.GetEvent() == event })
}
