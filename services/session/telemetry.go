package session

import (
	stdctx "context"
	"time"

	"github.com/dsh-go/dsh/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// appendTraced is append inside a dsh.session.append span: the event's
// type and seq, and the listeners of session/appended (persistence
// plugins, the live hub) under it.
func (s *Session) appendTraced(ctx stdctx.Context, e Event) Event {
	start := time.Now()
	ctx, span := telemetry.Start(ctx, "dsh.session.append", trace.WithAttributes(
		telemetry.AttrSession.String(s.ID()), attribute.String("dsh.session.event", string(e.Type))))
	e = s.append(ctx, e)
	span.SetAttributes(attribute.Int64("dsh.session.seq", e.Seq))
	span.End()
	s.storeLatency(ctx, "append", start)
	return e
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
