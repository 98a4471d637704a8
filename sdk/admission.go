package sdk

import (
	stdctx "context"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"google.golang.org/protobuf/proto"
)

// AdmissionEvent is the host's admission waterfall.
const AdmissionEvent = "agent-controller/admission"

// The SDK's event types are the protocol's own messages, declared once in
// sdk/proto/pluginv1/events.proto.
type (
	// Message is a message of the conversation.
	Message = pluginv1.Message
	// Source is who brings a message.
	Source = pluginv1.Source
	// Admission is the payload of agent-controller/admission.
	Admission = pluginv1.Admission
	// Decision is the outcome of the admission stage.
	Decision = pluginv1.Decision
)

// Admit lets the message in.
func Admit() *Decision { return &Decision{Kind: "admit"} }

// Reject refuses the message with a namespaced reason and a message for
// the sender; presented says the plugin already showed the refusal itself.
func Reject(reason, message string, presented bool) *Decision {
	return &Decision{Kind: "reject", Reason: reason, Message: message, Presented: presented}
}

// AdmissionNext runs the rest of the admission chain with a (possibly
// changed) admission.
type AdmissionNext func(ctx stdctx.Context, a *Admission) (*Decision, error)

// Admission listens to agent-controller/admission with typed values: admit
// by returning next's decision, hold by waiting before next, refuse by
// returning Reject without calling next.
func (p *Plugin) Admission(fn func(ctx stdctx.Context, a *Admission, next AdmissionNext) (*Decision, error), opts ...Option) {
	p.Waterfall(AdmissionEvent, func(ctx stdctx.Context, call Call, next Next) (*pluginv1.Result, error) {
		a := call.Payload.GetAdmission()
		if a == nil {
			return nil, badPayload(call, "admission")
		}
		// The handler may change a in place; only a changed admission
		// travels back.
		original := proto.Clone(a)
		d, err := fn(ctx, a, func(ctx stdctx.Context, changed *Admission) (*Decision, error) {
			var payload *pluginv1.Payload
			if !proto.Equal(changed, original) {
				payload = &pluginv1.Payload{Event: &pluginv1.Payload_Admission{Admission: changed}}
			}
			out, err := next(ctx, payload)
			if err != nil {
				return nil, err
			}
			return out.GetDecision(), nil
		})
		if err != nil {
			return nil, err
		}
		return &pluginv1.Result{Event: &pluginv1.Result_Decision{Decision: d}}, nil
	}, opts...)
}
