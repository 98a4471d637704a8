package execplugin

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
)

// Checked is what Check saw of a plugin: its answer to Describe and the
// protocol version the handshake agreed on.
type Checked struct {
	Describe *pluginv1.DescribeResponse
	Protocol int
}

// Check starts the plugin of e exactly as applying the entry would — the
// same environment, pin, handshake, Describe, requirements and Configure,
// bounded by start_timeout — checks that dsh can mount what it declares,
// and stops it again. It is `dsh plugins check`: an author sees what dsh
// sees, and the same errors.
func Check(ctx stdctx.Context, e config.Entry, log hclog.Logger) (*Checked, error) {
	r := newRemote(e, log)
	defer r.cancelStop()
	desc, p, err := r.start(ctx)
	if err != nil {
		return nil, err
	}
	defer p.stop(log)
	out := &Checked{Describe: desc, Protocol: p.client.NegotiatedVersion()}
	for _, l := range desc.GetListeners() {
		if b, ok := bridges[l.GetEvent()]; !ok || l.GetKind() != b.kind {
			return out, errs.New(PluginProtocol, fmt.Sprintf(
				"plugin %q (%s) listens to %q as %s, which plugin binaries cannot listen to yet; known: %s",
				e.ID, e.Exec, l.GetEvent(), l.GetKind(), bridgeNames()))
		}
	}
	return out, r.checkTools(desc.GetTools())
}
