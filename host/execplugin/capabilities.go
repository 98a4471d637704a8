package execplugin

import (
	"fmt"
	"runtime/debug"
	"slices"
	"sort"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// PluginUnsupported: the plugin requires a capability this host does not
// offer (DescribeResponse.requires); it is not started.
const PluginUnsupported errs.Code = "PLUGIN_UNSUPPORTED"

// ReasonMissingCapability marks a PLUGIN_UNSUPPORTED whose plugin requires
// a capability this host lacks; its details list them under "missing".
const ReasonMissingCapability = "host/missing-capability"

// Features a host offers beside the events plugins can listen to.
const (
	// CapTools: a plugin may declare tools in Describe.
	CapTools = "tools"
	// CapEmitBatch: the host sends notifications with EmitBatch to a
	// plugin that accepts it.
	CapEmitBatch = sdk.EmitBatch
	// CapMux: the host carries waterfall and tool calls on one Mux stream
	// per process to a plugin that accepts it.
	CapMux = sdk.Mux
)

// Capabilities is what this host offers a plugin binary, sorted: every
// event it bridges, by name, and its features. It is the one list, sent in
// DescribeRequest.capabilities and checked against
// DescribeResponse.requires.
func Capabilities() []string {
	out := []string{CapTools, CapEmitBatch, CapMux}
	for name := range bridges {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// checkRequires refuses a plugin that requires what this host lacks,
// naming each missing capability and the host's version, so its author
// knows what to drop or which dsh to run.
func checkRequires(e config.Entry, desc *pluginv1.DescribeResponse) error {
	offered := Capabilities()
	var missing []string
	for _, c := range desc.GetRequires() {
		if _, found := slices.BinarySearch(offered, c); !found && !slices.Contains(missing, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	err := errs.New(PluginUnsupported, fmt.Sprintf(
		"plugin %q (%s) requires %s, which this host (%s) does not offer; it offers: %s. Run a dsh that has %s, or rebuild the plugin without requiring %s",
		e.ID, e.Exec, quoteAll(missing), HostVersion(), strings.Join(offered, ", "), them(missing), them(missing))).WithReason(ReasonMissingCapability)
	err.Details = map[string]any{"missing": missing}
	return err
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}

func them(names []string) string {
	if len(names) == 1 {
		return "it"
	}
	return "them"
}

// HostVersion names this dsh and its plugin protocol, for messages to
// plugin authors.
func HostVersion() string {
	v := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		v = bi.Main.Version
	}
	return fmt.Sprintf("dsh %s, plugin protocol %d", v, sdk.ProtocolVersion)
}

// accepts reports whether a plugin said it understands feature.
func accepts(desc *pluginv1.DescribeResponse, feature string) bool {
	return slices.Contains(desc.GetAccepts(), feature)
}
