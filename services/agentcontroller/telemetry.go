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
// records, and an admission with no span context at all tells deliver
// so, which then looks for none (see Request.spanless).
func (c *Controller) deliverTraced(ctx stdctx.Context, agent agents.Agent, req Request) (string, error) {
	start := telemetry.Now()
	ctx, span := telemetry.Start(ctx, "dsh.admission")
	recording := span.IsRecording()
	if recording {
		p := req.Source.Provenance()
		span.SetAttributes(telemetry.AttrAgent.String(agent.ID()), telemetry.AttrEntryPoint.String(entryOf(req)),
			telemetry.AttrPrincipal.String(p.Principal.Kind+":"+p.Principal.ID), telemetry.AttrTenant.String(p.Principal.Tenant),
			telemetry.AttrRequestID.String(req.RequestID), telemetry.AttrMode.String(string(req.Mode)))
	} else if !span.SpanContext().IsValid() {
		// Start hands back a valid span context whenever ctx holds one
		// (a sampled-out parent's): an invalid one means there is none.
		req.spanless = true
	}
	id, err := c.deliver(ctx, agent, req)
	outcome := "admitted"
	if err != nil {
		outcome = "failed"
		if r, ok := RefusalOf(err); ok {
			outcome = "refused"
			if r.Expired {
				outcome = "expired"
			}
			if recording {
				span.SetAttributes(telemetry.AttrReason.String(r.Reason))
			}
		}
	}
	if recording {
		span.SetAttributes(telemetry.AttrVerdict.String(outcome), telemetry.AttrMessageID.String(id))
	}
	telemetry.End(span, err)
	if m := telemetry.M(); m != nil {
		m.Inputs.Add(1, entryOf(req), outcome)
		m.AdmissionDuration.SinceMono(start, outcome)
	}
	return id, err
}

// entryOf is the entry point attribute of req's input.
func entryOf(req Request) string {
	if req.Source.Entry == "" {
		return "unknown"
	}
	return req.Source.Entry
}
