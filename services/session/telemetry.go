package session

import (
	stdctx "context"
	"time"

	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// appendTrace is the dsh.session.append span of one Append: the event's
// type and seq, and the listeners of session/appended (persistence
// plugins, the live hub) under it.
type appendTrace struct {
	span  trace.Span
	start time.Time
}

func (s *Session) startAppend(ctx stdctx.Context, typ Type) (stdctx.Context, appendTrace) {
	ctx, span := telemetry.Start(ctx, "dsh.session.append", trace.WithAttributes(
		telemetry.AttrSession.String(s.ID()), attribute.String("dsh.session.event", string(typ))))
	return ctx, appendTrace{span: span, start: time.Now()}
}

func (t appendTrace) end(ctx stdctx.Context, s *Session, seq int64) {
	t.span.SetAttributes(attribute.Int64("dsh.session.seq", seq))
	t.span.End()
	s.storeLatency(ctx, "append", t.start)
}

// flushTraced is flush inside a dsh.session.flush span: the checkpoint
// the stores write at, timed as the session store's latency.
func (s *Session) flushTraced(ctx stdctx.Context) error {
	start := time.Now()
	ctx, span := telemetry.Start(ctx, "dsh.session.flush", trace.WithAttributes(telemetry.AttrSession.String(s.ID())))
	err := s.flush(ctx)
	telemetry.End(span, err)
	s.storeLatency(ctx, "flush", start)
	return err
}

func (s *Session) storeLatency(ctx stdctx.Context, op string, start time.Time) {
	if m := telemetry.M(); m != nil {
		m.SessionStore.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attribute.String("operation", op)))
	}
}
