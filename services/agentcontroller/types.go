package agentcontroller

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/waterfall"
)

// Mode says how a delivered message enters the inbox.
type Mode string

// Delivery modes.
const (
	// Followup queues the message for a later turn.
	Followup Mode = "followup"
	// Steer hands the message to the running turn.
	Steer Mode = "steer"
)

// SourceKind says who brings a message.
type SourceKind string

// Source kinds. Schedules and webhooks have nobody waiting for an answer.
// A subagent's task comes from its parent agent (the agent tool): it is
// unattended exactly when the parent's turn is (Source.Unattended), since
// the parent's person answers the child's approval questions.
const (
	SourceUser     SourceKind = "user"
	SourceSchedule SourceKind = "schedule"
	SourceWebhook  SourceKind = "webhook"
	SourcePlugin   SourceKind = "plugin"
	SourceSubagent SourceKind = "subagent"
	// SourceJob is a background job's end, reported to the agent that
	// started it (tools.bash jobs.wake), on behalf of that turn's person.
	SourceJob SourceKind = "job"
)

// Source describes the sender of a delivery.
type Source struct {
	Kind SourceKind `json:"kind"`
	// RPCID identifies the call or request that carried the message.
	RPCID string `json:"rpc_id,omitempty"`
	// Unattended marks a sender with no person waiting, whatever its kind.
	Unattended bool `json:"unattended,omitempty"`
	// Principal is who sent the message, as the entry point established
	// it; policies, quotas and the decision records key on it.
	Principal Principal `json:"principal,omitzero"`
	// Entry names the entry point the message came through: "cli",
	// "serve", "acp", "webhook", "schedule", "subagent", "goal", ....
	Entry string `json:"entry,omitempty"`
	// OnBehalfOf is the principal a delegate acts for, when it is not the
	// sender itself: a parent agent's person for a subagent, a webhook's
	// configured owner.
	OnBehalfOf *Principal `json:"on_behalf_of,omitempty"`
}

// Principal identifies a sender (see llm.Principal, where it is defined
// so that a message can carry its provenance to the tools service).
type Principal = llm.Principal

// Provenance is the part of a Source that says who is behind the message:
// what the message carries into its turn (llm.Message.From), so the
// approval stage knows who is behind each tool call.
func (s Source) Provenance() llm.Provenance {
	return llm.Provenance{Principal: s.Principal, Entry: s.Entry, OnBehalfOf: s.OnBehalfOf}
}

// IsUnattended reports whether nobody waits behind the message: a listener
// must never hold such a message waiting for a person.
func (s Source) IsUnattended() bool {
	return s.Unattended || s.Kind == SourceSchedule || s.Kind == SourceWebhook
}

// Prepared is the durable content Prepare made of the sender's input.
type Prepared struct {
	Content string
	// Parts is the message's content when it is multimodal (see
	// llm.Part): as the log keeps it, bytes stored and named by Ref.
	Parts []llm.Part
	// Release undoes what Prepare stored (an attachment, say). The
	// controller calls it when the message does not enter the inbox:
	// refused, cancelled, the agent gone, or insertion failed.
	Release func()
}

// Request is one delivery. When the sender's context can be cancelled,
// Prepare and BeforeInsert run on a goroutine of the controller's, so the
// sender can be answered while they or a listener still run; they never
// run at the same time as each other or as another delivery to the agent.
type Request struct {
	Mode   Mode
	Source Source
	// RequestID lets a sender retry safely: a request id the agent already
	// accepted returns the original message id without a second insertion.
	RequestID string
	// Content is the message text when Prepare is nil.
	Content string
	// Prepare turns the sender's input into message content. It runs after
	// every earlier delivery to the same agent settled; its error reaches
	// the sender unchanged.
	Prepare func(ctx stdctx.Context) (Prepared, error)
	// BeforeInsert runs right before the message enters the inbox, after
	// admission; an error keeps the message out and reaches the sender
	// unchanged.
	BeforeInsert func(msg llm.Message) error

	// spanless says the sender's context carries no span context: with
	// telemetry on but nothing sampled, the admission then looks for
	// none to pass on (signal, Handoff). Set by deliverTraced only.
	spanless bool
}

// DecisionKind is admit or reject.
type DecisionKind string

// Decision kinds.
const (
	DecisionAdmit  DecisionKind = "admit"
	DecisionReject DecisionKind = "reject"
)

// Decision is the outcome of the admission stage.
type Decision struct {
	Kind DecisionKind `json:"kind"`
	// Reason names a refusal, namespaced by its plugin ("admission/rate-limited").
	Reason string `json:"reason,omitempty"`
	// Message explains a refusal to the sender.
	Message string `json:"message,omitempty"`
	// Presented says the refusing plugin already showed the refusal in its
	// own interface, so the sender need not.
	Presented bool `json:"presented,omitempty"`
	// Expired marks a refusal because the message's wait ran out (a
	// readiness timeout), recorded as message/expired rather than
	// message/refused.
	Expired bool `json:"expired,omitempty"`
	// Policy names what decided, when a policy did ("policy.cel",
	// "budget", a plugin's id), and PolicyVersion which version of it
	// (a digest of its rules): the decision records name both, so a
	// replay can say which change made a decision differ.
	Policy        string `json:"policy,omitempty"`
	PolicyVersion string `json:"policy_version,omitempty"`
	// admitted is the message as the innermost step received it: a
	// listener may pass a rewritten message down with next (to redact it,
	// say), and that is what enters the inbox. Its content and parts are
	// taken: a rewrite may drop or reorder parts, but a part it adds must
	// name stored bytes by Ref (Data never reaches the log).
	admitted *llm.Message
}

// Admit is the decision that lets a message in.
func Admit() Decision { return Decision{Kind: DecisionAdmit} }

// Reject builds a refusal.
func Reject(reason, message string, presented bool) Decision {
	return Decision{Kind: DecisionReject, Reason: reason, Message: message, Presented: presented}
}

// Expire builds the refusal of a message whose wait in the admission
// stage ran out: a holding listener returns it when its limit passes.
func Expire(reason, message string, presented bool) Decision {
	d := Reject(reason, message, presented)
	d.Expired = true
	return d
}

// Admission is the payload of agent-controller/admission. The listener's
// ctx is the signal: it ends when the sender cancels or the controller
// stops, and a holding listener must return once it does.
type Admission struct {
	Agent   agents.Agent
	Message llm.Message
	Mode    Mode
	Source  Source
}

// Inserted is the payload of agent/inbox/inserted.
type Inserted struct {
	Agent   agents.Agent
	Message llm.Message
	Mode    Mode
	Source  Source
}

// Preparation is the payload of agent-controller/prepare: a delivery's
// content as the sender gave it (after Request.Prepare), before admission
// judges it.
type Preparation struct {
	Agent   agents.Agent
	Mode    Mode
	Source  Source
	Content string
	// Parts are the message's parts, when it has any; their first text
	// part is what the user typed.
	Parts []llm.Part
}

// RefusePreparation is the error a prepare listener returns to refuse the
// input: the delivery ends as a refusal with reason, recorded like one of
// admission's (message/refused), and its sender gets PromptRejected.
func RefusePreparation(reason, message string) error {
	return AgentAdmissionRejected(reason, message, false, nil)
}

// Events of the agent controller, dispatched in the agent's scope.
var (
	// EventPrepare turns a sender's input into the content the message
	// will hold, before admission: the seed's prepare step, open to
	// plugins (a prompt command expanded into its file's text). A listener
	// returns next's result, changed or not, or refuses with
	// RefusePreparation. Admission then judges, and adds nothing to, what
	// this stage made; the stage runs once per delivery, never on a retry
	// the controller answers from its record.
	EventPrepare = waterfall.New("agent-controller/prepare", func(_ stdctx.Context, p Preparation) (Preparation, error) {
		return p, nil
	})
	// EventAdmission decides whether a message enters the inbox. Admit by
	// returning next's decision, hold by waiting before next, refuse by
	// returning a Reject without calling next. The innermost step admits.
	//
	// A listener may pass a rewritten message on (its content, the mode),
	// but never another sender: the source and the message's identity
	// are the entry point's, and every listener after it sees the
	// originals whatever it passes to next (see keepSender).
	EventAdmission = waterfall.New("agent-controller/admission", func(_ stdctx.Context, a Admission) (Decision, error) {
		d := Admit()
		d.admitted = &a.Message
		return d, nil
	}).Keep(keepSender).Traced()
	// EventInserted is emitted once a delivered message is in the inbox.
	// React to admitted messages here; admission listeners never run after
	// insertion.
	EventInserted = waterfall.NewEmit[Inserted]("agent/inbox/inserted")
)

// Listener signatures of the controller's events, so a plugin can name
// them.
type (
	// PrepareListener turns a delivery's input into message content; see
	// EventPrepare.
	PrepareListener = waterfall.Listener[Preparation, Preparation]
	// PrepareNext passes a delivery's input on to the rest of the stage.
	PrepareNext = waterfall.Next[Preparation, Preparation]
	// AdmissionListener decides, holds or rewrites a delivery; see
	// EventAdmission.
	AdmissionListener = waterfall.Listener[Admission, Decision]
	// AdmissionNext passes a delivery on to the rest of the admission stage.
	AdmissionNext = waterfall.Next[Admission, Decision]
	// InsertedListener hears a message that entered an inbox.
	InsertedListener = waterfall.EmitListener[Inserted]
)

// keepSender is the admission stage's Keep: the sender's provenance — the
// Source (principal, entry, on whose behalf) and the message's identity
// (id, role, request id, unattended, From) — is what the entry point
// established. Policies, budgets and the decision records judge it, so a
// listener that passed another sender down would have them judge a forged
// one; the agent it is for stays too.
func keepSender(orig, passed Admission) Admission {
	passed.Agent, passed.Source = orig.Agent, orig.Source
	m, o := &passed.Message, &orig.Message
	m.ID, m.Role, m.RequestID, m.Unattended, m.From = o.ID, o.Role, o.RequestID, o.Unattended, o.From
	return passed
}
