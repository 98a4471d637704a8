package execplugin

import (
	stdctx "context"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
)

// RPC returns the live gRPC client of p, or nil while it is down.
func RPC(p *Plugin) pluginv1.PluginClient {
	if p == nil || p.remote == nil {
		return nil
	}
	return p.remote.current()
}

// PID returns the process id of p's binary, or 0.
func PID(p *Plugin) int {
	if p == nil || p.remote == nil {
		return 0
	}
	r := p.remote
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc.proc != nil {
		return r.proc.proc.Pid()
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

// CallAdmission runs one agent-controller/admission call with text into p,
// under ctx, as the bridge would; nil means the plugin passed it on.
func CallAdmission(p *Plugin, ctx stdctx.Context, text string) error {
	payload := &pluginv1.Payload{Event: &pluginv1.Payload_Admission{Admission: &pluginv1.Admission{
		AgentId: "main", Message: &pluginv1.Message{Role: "user", Content: text}, Mode: "followup"}}}
	_, err := p.remote.call(ctx, "agent-controller/admission", "main", payload, func(stdctx.Context, *pluginv1.Payload) (*pluginv1.Result, error) {
		return &pluginv1.Result{Event: &pluginv1.Result_Decision{Decision: &pluginv1.Decision{Kind: "admit"}}}, nil
	})
	return err
}

// GivenUp reports whether dsh stopped restarting p.
func GivenUp(p *Plugin) bool {
	p.remote.mu.Lock()
	defer p.remote.mu.Unlock()
	return p.remote.givenUp > 0
}

// MuxCalls returns how many calls p's current process was sent on its Mux
// stream, and whether it has a stream that still serves.
func MuxCalls(p *Plugin) (calls uint64, serving bool) {
	r := p.remote
	r.mu.Lock()
	m := r.proc.mux
	r.mu.Unlock()
	if m == nil {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastID, m.err == nil
}

// CallAdmissionThen is CallAdmission whose rest of the chain runs inside,
// while the plugin waits for next; the plugin's decision comes back
// (its reason, "" when it admitted).
func CallAdmissionThen(p *Plugin, ctx stdctx.Context, text string, inside func(stdctx.Context) error) (string, error) {
	payload := &pluginv1.Payload{Event: &pluginv1.Payload_Admission{Admission: &pluginv1.Admission{
		AgentId: "main", Message: &pluginv1.Message{Role: "user", Content: text}, Mode: "followup"}}}
	res, err := p.remote.call(ctx, "agent-controller/admission", "main", payload, func(c stdctx.Context, passed *pluginv1.Payload) (*pluginv1.Result, error) {
		if err := inside(c); err != nil {
			return nil, err
		}
		return &pluginv1.Result{Event: &pluginv1.Result_Decision{Decision: &pluginv1.Decision{Kind: "admit", Reason: passed.GetAdmission().GetMessage().GetContent()}}}, nil
	})
	return res.GetDecision().GetReason(), err
}
