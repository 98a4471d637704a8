package host

import (
	stdctx "context"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
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
	payload := &pluginv1.Payload{Event: &pluginv1.Payload_Admission{Admission: &pluginv1.Admission{
		AgentId: "main", Message: &pluginv1.Message{Role: "user", Content: text}, Mode: "followup"}}}
	_, err := r.call(ctx, "agent-controller/admission", "main", payload, func(stdctx.Context, *pluginv1.Payload) (*pluginv1.Result, error) {
		return &pluginv1.Result{Event: &pluginv1.Result_Decision{Decision: &pluginv1.Decision{Kind: "admit"}}}, nil
	})
	return err
}
