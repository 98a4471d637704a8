package sessions

import (
	stdctx "context"
	"github.com/dsh-go/dsh/services/agentcontroller"

	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// startInput starts the dsh.input span of a prompt: the root of what the
// prompt causes on this host (or the child of the entry point's request
// span, or of the host that forwarded it). The turn that answers the
// prompt continues from it (telemetry.MarkHandoff), so admission and the
// turn are siblings under it.
func startInput(ctx stdctx.Context, session string, src agentcontroller.Source, requestID string, mode agentcontroller.Mode) (stdctx.Context, trace.Span) {
	p := src.Provenance()
	entry := p.Entry
	if entry == "" {
		entry = "unknown"
	}
	if !telemetry.Records(ctx) {
		// Nothing to name: the span would not record.
		ctx, span := telemetry.Start(ctx, "")
		return telemetry.MarkHandoff(ctx), span
	}
	ctx, span := telemetry.Start(ctx, "dsh.input "+entry)
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrSession.String(session), telemetry.AttrEntryPoint.String(entry),
			telemetry.AttrPrincipal.String(p.Principal.Kind+":"+p.Principal.ID), telemetry.AttrTenant.String(p.Principal.Tenant),
			telemetry.AttrRequestID.String(requestID), telemetry.AttrMode.String(string(mode)))
		if p.OnBehalfOf != nil {
			span.SetAttributes(attribute.Key("dsh.on_behalf_of").String(p.OnBehalfOf.Kind + ":" + p.OnBehalfOf.ID))
		}
	}
	return telemetry.MarkHandoff(ctx), span
}
