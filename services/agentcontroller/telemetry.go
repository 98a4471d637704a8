package agentcontroller

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/telemetry"
)

// deliverTraced is deliver inside a dsh.admission span, counted in the
// dsh.inputs and dsh.admission.duration metrics. Kept apart so a host
// without telemetry runs deliver as it always did. A sampled-out
// admission pays for the metrics and little else: its duration is two
// monotonic clock reads, the span's attributes are built only when it
// records, and an admission with no span at all (sampling 0, no caller's
// trace) makes none and tells deliver so, which then looks for none
// (see Request.spanless).
func (c *Controller) deliverTraced(ctx stdctx.Context, agent agents.Agent, req Request) (string, error) {
	start := telemetry.Now()
	if telemetry.Spanless(ctx) {
		req.spanless = true
		id, err := c.deliver(ctx, agent, req)
		countInput(req, start, err)
		return id, err
	}
	ctx, span := telemetry.Start(ctx, "dsh.admission")
	recording := span.IsRecording()
	if recording {
		p := req.Source.Provenance()
		span.SetAttributes(telemetry.AttrAgent.String(agent.ID()), telemetry.AttrEntryPoint.String(entryOf(req)),
			telemetry.AttrPrincipal.String(p.Principal.Kind+":"+p.Principal.ID), telemetry.AttrTenant.String(p.Principal.Tenant),
			telemetry.AttrRequestID.String(req.RequestID), telemetry.AttrMode.String(string(req.Mode)))
	}
	id, err := c.deliver(ctx, agent, req)
	if recording {
		outcome, reason := outcomeOf(err)
		if reason != "" {
			span.SetAttributes(telemetry.AttrReason.String(reason))
		}
		span.SetAttributes(telemetry.AttrVerdict.String(outcome), telemetry.AttrMessageID.String(id))
	}
	telemetry.End(span, err)
	countInput(req, start, err)
	return id, err
}

// outcomeOf is the admission's outcome attribute for deliver's err, and
// the refusal's reason when it was refused or expired.
func outcomeOf(err error) (outcome, reason string) {
	if err == nil {
		return "admitted", ""
	}
	r, ok := RefusalOf(err)
	if !ok {
		return "failed", ""
	}
	if r.Expired {
		return "expired", r.Reason
	}
	return "refused", r.Reason
}

// countInput counts an admission that began at start in dsh.inputs and
// dsh.admission.duration.
func countInput(req Request, start telemetry.Mono, err error) {
	m := telemetry.M()
	if m == nil {
		return
	}
	outcome, _ := outcomeOf(err)
	m.Inputs.Add(1, entryOf(req), outcome)
	m.AdmissionDuration.SinceMono(start, outcome)
}

// entryOf is the entry point attribute of req's input.
func entryOf(req Request) string {
	if req.Source.Entry == "" {
		return "unknown"
	}
	return req.Source.Entry
}
