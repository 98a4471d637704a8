package session

import (
	stdctx "context"

	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// appendTrace is the dsh.session.append span of one Append: the event's
// type and seq, and the listeners of session/appended (persistence
// plugins, the live hub) under it.
//
// An append is in memory; what a store costs shows at the flush, so only
// the flush is timed in dsh.session.store.duration (a histogram record per
// append made a sampled-out turn half again as costly).
type appendTrace struct {
	span trace.Span
}

func (s *Session) startAppend(ctx stdctx.Context, typ Type) (stdctx.Context, appendTrace) {
	ctx, span := telemetry.Start(ctx, "dsh.session.append")
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrSession.String(s.ID()), attribute.String("dsh.session.event", string(typ)))
	}
	return ctx, appendTrace{span: span}
}

func (t appendTrace) end(seq int64) {
	if t.span.IsRecording() {
		t.span.SetAttributes(attribute.Int64("dsh.session.seq", seq))
	}
	t.span.End()
}

// flushTraced is flush inside a dsh.session.flush span: the checkpoint
// the stores write at, timed as the session store's latency.
func (s *Session) flushTraced(ctx stdctx.Context) error {
	start := telemetry.Now()
	ctx, span := telemetry.Start(ctx, "dsh.session.flush")
	if span.IsRecording() {
		span.SetAttributes(telemetry.AttrSession.String(s.ID()))
	}
	err := s.flush(ctx)
	telemetry.End(span, err)
	s.storeLatency(ctx, "flush", start)
	return err
}

func (s *Session) storeLatency(ctx stdctx.Context, op string, start telemetry.Mono) {
	if m := telemetry.M(); m != nil {
		m.SessionStore.SinceMono(start, op)
	}
}
