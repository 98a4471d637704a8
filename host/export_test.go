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

// PluginPID returns the process id of the root exec: entry with id, or 0.
func PluginPID(h *Host, id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, m := range h.plugins {
		if m.entry.ID == id && m.exec != nil && m.exec.remote != nil {
			r := m.exec.remote
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.proc.client != nil {
				if rc := r.proc.client.ReattachConfig(); rc != nil {
					return rc.Pid
				}
			}
		}
	}
	return 0
}

// BridgedEvents returns the events plugin binaries can listen to, each
// with its kind ("waterfall" or "emit").
func BridgedEvents() map[string]string {
	out := map[string]string{}
	for name, b := range bridges {
		out[name] = "emit"
		if b.kind == pluginv1.Kind_KIND_WATERFALL {
			out[name] = "waterfall"
		}
	}
	return out
}
