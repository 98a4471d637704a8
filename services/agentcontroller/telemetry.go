package agentcontroller

import (
	stdctx "context"
	"sync"
	"time"

	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
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
		in, verdict := inputAttrs(entry, outcome)
		m.Inputs.Add(ctx, 1, in)
		m.AdmissionDuration.Record(ctx, time.Since(start).Seconds(), verdict)
	}
	return id, err
}

type inputKey struct{ entry, outcome string }

type inputOpts struct {
	in      metric.AddOption
	verdict metric.RecordOption
}

// inputSets keeps the attribute sets of the input metrics by entry point
// and outcome: a handful of pairs, each built once rather than per prompt.
var inputSets sync.Map // inputKey → inputOpts

func inputAttrs(entry, outcome string) (metric.AddOption, metric.RecordOption) {
	k := inputKey{entry, outcome}
	if o, ok := inputSets.Load(k); ok {
		v := o.(inputOpts)
		return v.in, v.verdict
	}
	v := inputOpts{
		in:      metric.WithAttributeSet(attribute.NewSet(attribute.String("entry_point", entry), attribute.String("outcome", outcome))),
		verdict: metric.WithAttributeSet(attribute.NewSet(attribute.String("verdict", outcome))),
	}
	inputSets.Store(k, v)
	return v.in, v.verdict
}
