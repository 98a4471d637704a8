// Package sdk is what a dsh plugin binary imports. A plugin declares the
// events it listens to, with handlers shaped like in-process listeners —
// payload and next in, result or error out — and calls Serve. The host
// starts the binary over hashicorp/go-plugin with gRPC, and the plugin's
// listeners join the host's waterfalls like any other: they can hold, call
// next, replace the payload, or refuse.
//
//	func main() {
//		p := sdk.New("no-robots", "1.0.0")
//		p.Admission(func(ctx context.Context, a sdk.Admission, next sdk.AdmissionNext) (sdk.Decision, error) {
//			if a.Source.Unattended {
//				return sdk.Reject("no-robots/unattended", "only people may write here", false), nil
//			}
//			return next(ctx, a)
//		})
//		p.Serve()
//	}
//
// Admission, ToolExecute and Approval (the approval stage, which fails
// closed when the plugin cannot answer) take typed values, as do the
// notification listeners OnStatus, OnStreamChunk (chunks arrive in
// batches), OnSessionEvent, OnSessionOutcome, OnApprovalRequested and
// OnApprovalAnswered; Waterfall and Emit take any event the host bridges,
// with its payload as JSON. Tool gives the model a tool of the plugin's
// own, registered by the host like a built-in one. Require names host
// capabilities the plugin cannot work without; HostCapabilities says what
// the host offered.
//
// The SDK is a Go module of its own, github.com/dsh-go/dsh/sdk, with its
// own Version; it depends on go-plugin, gRPC and protobuf, not on dsh.
// Package sdktest runs a plugin in a test and drives it through the real
// protocol, without dsh; `dsh plugins check` shows what dsh sees of a
// built binary. docs/plugins.md is the author's guide.
//
// Plugins in Python use sdk/python; plugins in other languages implement
// sdk/proto/pluginv1/plugin.proto, and sdk/proto/pluginv1/EVENTS.md gives
// the JSON of every event.
package sdk

import (
	stdctx "context"

	"github.com/dsh-go/dsh/sdk/internal/hostwatch"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-plugin"
	"google.golang.org/grpc"
)

// MagicCookieEnv names the variable that carries go-plugin's handshake
// cookie to a plugin; HostFDEnv the one that names the host pipe, whose
// end-of-file tells a plugin dsh is gone. A plugin in another language
// reads both (sdk/python does).
const (
	MagicCookieEnv = "DSH_PLUGIN_MAGIC_COOKIE"
	HostFDEnv      = hostwatch.HostFDEnv
)

// ProtocolVersion is the dsh plugin protocol this SDK speaks. Version 2
// carries typed payloads (events.proto) where version 1 carried JSON bytes,
// so the two cannot read each other and the handshake refuses the mix.
const ProtocolVersion = 2

// Handshake is shared by the host and every plugin: a plugin started by
// anything else exits with a message instead of serving.
var Handshake = plugin.HandshakeConfig{
	ProtocolVersion:  ProtocolVersion,
	MagicCookieKey:   MagicCookieEnv,
	MagicCookieValue: "d5h-pl4g1n-8c0f",
}

// PluginName is the name the plugin is dispensed under.
const PluginName = "dsh"

// GRPCPlugin adapts the protocol to go-plugin. The host uses it with no
// Impl to get a client; a plugin binary serves with Impl set.
type GRPCPlugin struct {
	plugin.NetRPCUnsupportedPlugin
	Impl pluginv1.PluginServer
}

// GRPCServer registers the plugin's service.
func (g *GRPCPlugin) GRPCServer(_ *plugin.GRPCBroker, s *grpc.Server) error {
	pluginv1.RegisterPluginServer(s, g.Impl)
	return nil
}

// GRPCClient returns a pluginv1.PluginClient.
func (g *GRPCPlugin) GRPCClient(_ stdctx.Context, _ *plugin.GRPCBroker, c *grpc.ClientConn) (any, error) {
	return pluginv1.NewPluginClient(c), nil
}

// VersionedPlugins is the plugin set per protocol version, so a future v2
// can be served next to v1 and negotiated.
func VersionedPlugins(server pluginv1.PluginServer) map[int]plugin.PluginSet {
	return map[int]plugin.PluginSet{ProtocolVersion: {PluginName: &GRPCPlugin{Impl: server}}}
}
