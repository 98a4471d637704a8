package host

import (
	stdctx "context"
	"encoding/json"
)

// CallAdmission runs one agent-controller/admission call with text into
// the root exec: entry id, under ctx, as the bridge would; nil means the
// plugin passed it on.
func CallAdmission(h *Host, id string, ctx stdctx.Context, text string) error {
	h.mu.Lock()
	var r *remote
	for _, m := range h.plugins {
		if m.entry.ID == id && m.exec != nil {
			r = m.exec.remote
		}
	}
	h.mu.Unlock()
	payload, _ := json.Marshal(map[string]any{"agent_id": "main", "message": map[string]any{"role": "user", "content": text}, "mode": "followup"})
	_, err := r.call(ctx, "agent-controller/admission", "main", payload, func(stdctx.Context, []byte) ([]byte, error) {
		return []byte(`{"kind":"admit"}`), nil
	})
	return err
}
