package cluster

import (
	stdctx "context"
	"net/http"

	"github.com/dsh-go/dsh/telemetry"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// startForward starts the producer span of a request forwarded to host
// target and returns the NATS headers that carry its trace context, so
// the owner's work on the request continues the same trace.
func (h *Host) startForward(ctx stdctx.Context, target string, req request) (stdctx.Context, trace.Span, nats.Header) {
	var span trace.Span
	if telemetry.Records(ctx) {
		ctx, span = telemetry.Start(ctx, "dsh.forward "+req.Op, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
			telemetry.AttrHost.String(h.o.HostID), attribute.Key("dsh.forward.to").String(target),
			telemetry.AttrSession.String(req.Session), telemetry.AttrRequestID.String(req.RequestID),
			attribute.Key("messaging.system").String("nats")))
	} else {
		// Not recorded: no name to build; a sampled-out context is
		// still passed on below.
		ctx, span = telemetry.Start(ctx, "")
	}
	header := nats.Header{}
	// nats.Header and http.Header are the same map type; the carrier
	// canonicalises keys on both ends alike.
	telemetry.Inject(ctx, propagation.HeaderCarrier(http.Header(header)))
	if len(header) == 0 {
		header = nil
	}
	return ctx, span, header
}

// startServe continues the trace a forwarded request carries, in a
// consumer span of this host. Off, it returns the host's context.
func (h *Host) startServe(m *nats.Msg, req request) (stdctx.Context, trace.Span) {
	if !telemetry.Enabled() {
		return telemetry.Start(h.ctx, "")
	}
	ctx := h.ctx
	if m.Header != nil {
		ctx = telemetry.Extract(ctx, propagation.HeaderCarrier(http.Header(m.Header)))
	}
	return telemetry.Start(ctx, "dsh.forwarded "+req.Op, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		telemetry.AttrHost.String(h.o.HostID), attribute.Key("dsh.forward.from").String(req.From),
		telemetry.AttrSession.String(req.Session), telemetry.AttrRequestID.String(req.RequestID)))
}
