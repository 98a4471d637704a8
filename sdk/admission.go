package sdk

import (
	stdctx "context"
	"encoding/json"
)

// AdmissionEvent is the host's admission waterfall.
const AdmissionEvent = "agent-controller/admission"

// Message is a message as the admission stage shows it.
type Message struct {
	ID        string `json:"id,omitempty"`
	Role      string `json:"role"`
	Content   string `json:"content,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Source is who brings the message.
type Source struct {
	Kind       string `json:"kind"`
	RPCID      string `json:"rpc_id,omitempty"`
	Unattended bool   `json:"unattended,omitempty"`
}

// Admission is the payload of agent-controller/admission.
type Admission struct {
	AgentID string  `json:"agent_id"`
	Message Message `json:"message"`
	Mode    string  `json:"mode"`
	Source  Source  `json:"source"`
}

// IsUnattended reports whether nobody waits behind the message (a
// schedule, a webhook): never hold such a message waiting for a person.
func (a Admission) IsUnattended() bool {
	return a.Source.Unattended || a.Source.Kind == "schedule" || a.Source.Kind == "webhook"
}

// Decision is the outcome of the admission stage.
type Decision struct {
	Kind      string `json:"kind"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	Presented bool   `json:"presented,omitempty"`
}

// Admit lets the message in.
func Admit() Decision { return Decision{Kind: "admit"} }

// Reject refuses the message with a namespaced reason and a message for
// the sender; presented says the plugin already showed the refusal itself.
func Reject(reason, message string, presented bool) Decision {
	return Decision{Kind: "reject", Reason: reason, Message: message, Presented: presented}
}

// AdmissionNext runs the rest of the admission chain with a (possibly
// changed) admission.
type AdmissionNext func(ctx stdctx.Context, a Admission) (Decision, error)

// Admission listens to agent-controller/admission with typed values: admit
// by returning next's decision, hold by waiting before next, refuse by
// returning Reject without calling next.
func (p *Plugin) Admission(fn func(ctx stdctx.Context, a Admission, next AdmissionNext) (Decision, error), opts ...Option) {
	p.Waterfall(AdmissionEvent, func(ctx stdctx.Context, call Call, next Next) (json.RawMessage, error) {
		var a Admission
		if err := json.Unmarshal(call.Payload, &a); err != nil {
			return nil, err
		}
		original := a
		d, err := fn(ctx, a, func(ctx stdctx.Context, changed Admission) (Decision, error) {
			var payload json.RawMessage
			if changed != original {
				var err error
				if payload, err = json.Marshal(changed); err != nil {
					return Decision{}, err
				}
			}
			out, err := next(ctx, payload)
			if err != nil {
				return Decision{}, err
			}
			var d Decision
			return d, json.Unmarshal(out, &d)
		})
		if err != nil {
			return nil, err
		}
		return json.Marshal(d)
	}, opts...)
}
