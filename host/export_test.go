package host

import "github.com/dsh-go/dsh/sdk/proto/pluginv1"

// PluginRPC returns the gRPC client of the root exec: entry with id.
func PluginRPC(h *Host, id string) pluginv1.PluginClient {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.plugins {
		if m.entry.ID == id && m.exec != nil && m.exec.remote != nil {
			return m.exec.remote.current()
		}
	}
	return nil
}
