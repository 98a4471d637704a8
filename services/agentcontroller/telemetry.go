package agentcontroller

import (
	stdctx "context"
	"time"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/telemetry"
)

// deliverTraced is deliver inside a dsh.admission span, counted in the
// dsh.inputs and dsh.admission.duration metrics. Kept apart so a host
// without telemetry runs deliver as it always did.
func (c *Controller) deliverTraced(ctx stdctx.Context, agent agents.Agent, req Request) (string, error) {
	start := time.Now()
	p := req.Source.Provenance()
	entry := p.Entry
	if entry == "" {
		entry = "unknown"
	}
	ctx, span := telemetry.Start(ctx, "dsh.admission")
	recording := span.IsRecording()
	if recording {
		span.SetAttributes(telemetry.AttrAgent.String(agent.ID()), telemetry.AttrEntryPoint.String(entry),
			telemetry.AttrPrincipal.String(p.Principal.Kind+":"+p.Principal.ID), telemetry.AttrTenant.String(p.Principal.Tenant),
			telemetry.AttrRequestID.String(req.RequestID), telemetry.AttrMode.String(string(req.Mode)))
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
		m.Inputs.Add(1, entry, outcome)
		m.AdmissionDuration.Since(start, outcome)
	}
	return id, err
}
