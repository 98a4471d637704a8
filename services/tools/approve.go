package tools

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"strings"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/waterfall"
)

// Approval is the payload of tools/approve: a call whose arguments have
// been validated, and the tool it would run.
type Approval struct {
	Call Call
	Tool *Tool
}

// Verdict is the approval stage's answer for one call.
type Verdict struct {
	Decision Decision
	// Reason says why; for Deny it is what the model is told.
	Reason string
	// Pattern is what an "allow for this session" answer to an Ask
	// covers, such as a bash command's program name; "" means the tool.
	Pattern string
	// Source names the policy that decided ("" for the tool's default),
	// so a policy can tell another policy's decision from the default.
	Source string
	// PolicyVersion is the version of the deciding policy (a digest of
	// its rules), recorded with the decision beside Source.
	PolicyVersion string
	// Arguments, when set, replace the call's arguments (a hook that
	// rewrites a command, a policy that pins a path). They are validated
	// against the tool's schema again before the call runs, and a person
	// asked for approval sees them.
	Arguments json.RawMessage
}

// EventApprove decides whether a call may run, before tools/execute.
// Policy plugins listen to it; the default is the tool's own Approval
// (Allow when it declares none). A policy may pass the call on with other
// arguments, never acting for someone else: whom it acts for (its Sources,
// Unattended, its agent) stays the original for every policy after it.
var EventApprove = waterfall.New("tools/approve", defaultVerdict).Keep(keepCaller).Traced()

// keepCaller is the approval stage's Keep: whom a call acts for is its
// turn's inputs', set by the agent loop from their provenance, and the
// policies after a listener judge that, whatever it passed to next.
func keepCaller(orig, passed Approval) Approval {
	c, o := &passed.Call, &orig.Call
	c.AgentID, c.Unattended, c.Sources = o.AgentID, o.Unattended, o.Sources
	return passed
}

// Listener signatures of tools/approve.
type (
	// ApproveListener decides, or passes the call on with next.
	ApproveListener = waterfall.Listener[Approval, Verdict]
	// ApproveNext asks the policies after this one, ending with the
	// tool's default.
	ApproveNext = waterfall.Next[Approval, Verdict]
)

func defaultVerdict(_ stdctx.Context, a Approval) (Verdict, error) {
	if a.Tool == nil || a.Tool.Approval == "" {
		return Verdict{Decision: Allow}, nil
	}
	return Verdict{Decision: a.Tool.Approval}, nil
}

// approve runs the approval stage for a validated call. ok says the call
// may run, as the returned call (a policy may have rewritten its
// arguments, see Verdict.Arguments); otherwise r is what the model is told,
// or err ends the turn (ctx ended, or a policy panicked).
//
// A config reload holds the stage (see Service.Hold): the call waits for the
// swap and is decided by the policies of the config that then runs; when
// the reload overruns its limit the call is refused, never decided by
// whichever policies happen to be in place.
func (s *Service) approve(ctx stdctx.Context, at *dshctx.Context, e *entry, call Call) (_ Call, r Result, ok bool, err error) {
	if r, ok := gated(ctx, at, call, &e.tool); !ok {
		return call, r, false, nil
	}
	g := &s.root().gate
	why, err := enter(g, ctx)
	if err != nil {
		return call, Result{}, false, withdrawn(call, err)
	}
	if why != nil {
		return call, refuse("was not approved: %v, so the call was not checked. It did not run; retry it later.", call.Name, why), false, nil
	}
	ctx, span := telemetry.Start(ctx, "dsh.approval")
	defer span.End()
	v, err := EventApprove.Dispatch(ctx, at, Approval{Call: call, Tool: &e.tool})
	g.Leave()
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrToolName.String(call.Name), telemetry.AttrApproval.String(string(v.Decision)), attribute.String("dsh.approval.source", v.Source))
		telemetry.RecordError(span, err)
	}
	if err != nil {
		if ctx.Err() != nil {
			return call, Result{}, false, withdrawn(call, err)
		}
		record(ctx, at, call, session.StageApproval, VerdictError, err.Error(), "", "")
		if errs.HasCode(err, errs.ListenerFailed) {
			return call, Result{}, false, err
		}
		// A policy that fails is not a permission: refuse, and say so.
		return call, refuse("was not approved: the approval policy failed (%v). It did not run.", call.Name, err), false, nil
	}
	record(ctx, at, call, session.StageApproval, string(v.Decision), v.Reason, v.Source, v.PolicyVersion)
	if len(bytes.TrimSpace(v.Arguments)) > 0 && v.Decision != Deny {
		call.Arguments = v.Arguments
		if r, ok := validate(e.schema, call); !ok {
			r.Content = fmt.Sprintf("The approval policy%s rewrote the arguments of the call to %q, and the rewrite is not valid: %s",
				by(v.Source), call.Name, r.Content)
			return call, r, false, nil
		}
		// The gate judges what will run: a rewrite must not turn a call
		// it let through into one it refuses.
		if r, ok := gated(ctx, at, call, &e.tool); !ok {
			return call, r, false, nil
		}
	}
	r, ok, err = decide(ctx, at, call, &e.tool, v)
	return call, r, ok, err
}

// decide acts on the stage's verdict.
func decide(ctx stdctx.Context, at *dshctx.Context, call Call, t *Tool, v Verdict) (Result, bool, error) {
	switch v.Decision {
	case Allow:
		return Result{}, true, nil
	case Deny:
		return refuse("was denied%s: %s. It did not run; do not retry it unchanged.",
			call.Name, by(v.Source), orNone(v.Reason)), false, nil
	case Ask:
		return ask(ctx, at, call, t, v)
	default:
		return refuse("was not approved: the approval policy%s decided %q, which is not allow, deny or ask. It did not run.",
			call.Name, by(v.Source), v.Decision), false, nil
	}
}

// ask hands the call to the approval service of the agent.
func ask(ctx stdctx.Context, at *dshctx.Context, call Call, t *Tool, v Verdict) (Result, bool, error) {
	agentID := call.AgentID
	if agentID == "" {
		agentID = at.Tag()
	}
	req := approval.Request{
		AgentID: agentID, CallID: call.ID, Tool: call.Name, Arguments: call.Arguments,
		Summary: summary(call), Reason: v.Reason, Pattern: v.Pattern, Source: v.Source,
	}
	if t != nil && t.Summary != nil {
		req.Summary = t.Summary(call)
	}
	if call.Unattended {
		record(ctx, at, call, session.StageAnswer, string(approval.Deny), "unattended", AnsweredByNobody, "")
		return refuse("was not approved: it needs approval%s, and this turn came from an unattended source (a webhook, a schedule or another agent), "+
			"which never waits for a person, so it was refused. It did not run; carry on without it. "+
			"An operator can allow it with a tools.permission rule with decision allow.", call.Name, because(v.Reason)), false, nil
	}
	svc, err := approval.Key.Get(at)
	var ans approval.Answer
	if err != nil {
		// Refused like an agent nobody answers for; the operator learns
		// why from the log, the model from the result.
		telemetry.Logger(ctx, at.Logger()).Warn("a tool call asks for approval but no approval service is loaded; refused", "tool", call.Name, "error", err)
		err = errs.Wrap(approval.NoAnswerer, err, "no approval service is loaded")
	} else {
		ans, err = askTraced(ctx, svc, req)
	}
	if ctx.Err() != nil {
		// Whatever was answered, the call is cancelled: it never runs.
		return Result{}, false, withdrawn(call, ctx.Err())
	}
	recordAnswer(ctx, at, call, ans, err)
	switch {
	case errs.HasCode(err, approval.NoAnswerer):
		return refuse("was not approved: it needs approval%s and nobody is attached to agent %q to ask, so it was refused. "+
			"It did not run; carry on without it or tell the user what you need. "+
			"An operator can allow it with `dsh run --allow %s`, a tools.permission rule with decision allow, or by running dsh interactively.",
			call.Name, because(v.Reason), agentID, call.Name), false, nil
	case err != nil:
		return refuse("was not approved: asking for approval failed (%v). It did not run.", call.Name, err), false, nil
	case ans.Allowed():
		return Result{}, true, nil
	case ans.Unattended:
		// Nobody was there: saying "denied by the user" would send the
		// model to ask a person who does not exist.
		return refuse("was not approved: it needs approval%s, and this run has nobody to ask, so it was refused automatically: %s. "+
			"It did not run; carry on without it, or say in your answer what you could not do.",
			call.Name, because(v.Reason), orNone(ans.Reason)), false, nil
	default:
		return refuse("was denied by the user: %s. It did not run; ask the user how to proceed or take another approach.",
			call.Name, orNone(ans.Reason)), false, nil
	}
}

// refuse words a refusal: "The call to "tool" " + what happened.
func refuse(format, tool string, args ...any) Result {
	return Result{Content: fmt.Sprintf("The call to %q "+format, append([]any{tool}, args...)...), IsError: true}
}

func by(source string) string {
	if source == "" {
		return ""
	}
	return fmt.Sprintf(" by %q", source)
}

func because(reason string) string {
	if reason == "" {
		return ""
	}
	return " (" + reason + ")"
}

func orNone(reason string) string {
	if reason == "" {
		return "no reason was given"
	}
	return reason
}

// maxSummary bounds the call shown to a person.
const maxSummary = 200

// summary shows the call to a person: a command when there is one (bash),
// else the arguments as compact JSON.
func summary(call Call) string {
	var args struct {
		Command string `json:"command"`
	}
	if json.Unmarshal(call.Arguments, &args) == nil && args.Command != "" {
		return args.Command
	}
	var b bytes.Buffer
	if json.Compact(&b, call.Arguments) != nil {
		return call.Name
	}
	s := call.Name + " " + b.String()
	if len(s) > maxSummary {
		s = strings.ToValidUTF8(s[:maxSummary], "") + "…"
	}
	return s
}

// withdrawn is the error of a call whose turn ended while the approval
// stage decided it: it never ran, which the agent loop tells the model
// (a call cut off while running may have partly run; this one cannot).
func withdrawn(call Call, cause error) error {
	return errs.Wrap(NotApproved, cause, fmt.Sprintf("the call to %q was not approved before its turn ended; it did not run", call.Name))
}

// recordAnswer records how an Ask was answered, or why nobody answered.
func recordAnswer(ctx stdctx.Context, at *dshctx.Context, call Call, ans approval.Answer, err error) {
	switch {
	case errs.HasCode(err, approval.NoAnswerer):
		record(ctx, at, call, session.StageAnswer, string(approval.Deny), "no-answerer", AnsweredByNobody, "")
	case err != nil:
		record(ctx, at, call, session.StageAnswer, VerdictError, err.Error(), "", "")
	case ans.Unattended:
		record(ctx, at, call, session.StageAnswer, string(ans.Choice), orNone(ans.Reason), AnsweredByNobody, "")
	default:
		record(ctx, at, call, session.StageAnswer, string(ans.Choice), ans.Reason, AnsweredByPerson, "")
	}
}
