package telemetry

import (
	stdctx "context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Metrics are dsh's instruments. Reach them through M, which is nil when
// telemetry is off: callers check Enabled (or M() != nil) first.
type Metrics struct {
	// Inputs counts prompts offered to admission, by dsh.entry_point and
	// dsh.outcome (admitted, refused, expired, failed).
	Inputs metric.Int64Counter
	// AdmissionDuration is the time admission took, by verdict.
	AdmissionDuration metric.Float64Histogram
	// AdmissionHolds counts listeners that held a message (took time
	// before passing it on), by listener.
	AdmissionHolds metric.Int64Counter
	// Turns counts turns ended, by agent and outcome; Steps the steps.
	Turns metric.Int64Counter
	Steps metric.Int64Counter
	// Tokens counts tokens by agent, model, principal, tenant and
	// gen_ai.token.type (input, output, cached).
	Tokens metric.Int64Counter
	// Cost is the priced cost in USD, by agent, model, principal and tenant.
	Cost metric.Float64Counter
	// ModelDuration is the model request's duration (gen_ai.client.operation.duration).
	ModelDuration metric.Float64Histogram
	// ToolCalls counts tool calls by tool and outcome.
	ToolCalls metric.Int64Counter
	// Approvals counts approvals asked, by verdict and answerer;
	// ApprovalWait is how long they waited.
	Approvals    metric.Int64Counter
	ApprovalWait metric.Float64Histogram
	// PluginRestarts counts restarts of plugin binaries, by plugin.
	PluginRestarts metric.Int64Counter
	// SessionStore is the session store's latency, by operation.
	SessionStore metric.Float64Histogram
	// SSESubscribers is the number of attached event streams.
	SSESubscribers metric.Int64UpDownCounter
}

func newMetrics(m metric.Meter) (*Metrics, error) {
	var out Metrics
	var errList []error
	add := func(err error) { errList = append(errList, err) }
	var err error
	out.Inputs, err = m.Int64Counter("dsh.inputs", metric.WithDescription("Prompts offered to admission, by entry point and outcome."), metric.WithUnit("{input}"))
	add(err)
	out.AdmissionDuration, err = m.Float64Histogram("dsh.admission.duration", metric.WithDescription("Time admission took to decide, by verdict."), metric.WithUnit("s"))
	add(err)
	out.AdmissionHolds, err = m.Int64Counter("dsh.admission.holds", metric.WithDescription("Admission listeners that held a message before passing it on."), metric.WithUnit("{hold}"))
	add(err)
	out.Turns, err = m.Int64Counter("dsh.turns", metric.WithDescription("Turns ended, by agent and outcome."), metric.WithUnit("{turn}"))
	add(err)
	out.Steps, err = m.Int64Counter("dsh.steps", metric.WithDescription("Steps run, by agent."), metric.WithUnit("{step}"))
	add(err)
	out.Tokens, err = m.Int64Counter("dsh.tokens", metric.WithDescription("Model tokens, by agent, model, principal, tenant and type."), metric.WithUnit("{token}"))
	add(err)
	out.Cost, err = m.Float64Counter("dsh.cost", metric.WithDescription("Priced model cost, by agent, model, principal and tenant."), metric.WithUnit("USD"))
	add(err)
	out.ModelDuration, err = m.Float64Histogram("gen_ai.client.operation.duration", metric.WithDescription("Model request duration."), metric.WithUnit("s"))
	add(err)
	out.ToolCalls, err = m.Int64Counter("dsh.tool.calls", metric.WithDescription("Tool calls, by tool and outcome."), metric.WithUnit("{call}"))
	add(err)
	out.Approvals, err = m.Int64Counter("dsh.approvals", metric.WithDescription("Approvals asked, by verdict and answerer."), metric.WithUnit("{approval}"))
	add(err)
	out.ApprovalWait, err = m.Float64Histogram("dsh.approval.wait", metric.WithDescription("Time an approval waited for its answer."), metric.WithUnit("s"))
	add(err)
	out.PluginRestarts, err = m.Int64Counter("dsh.plugin.restarts", metric.WithDescription("Restarts of plugin binaries, by plugin."), metric.WithUnit("{restart}"))
	add(err)
	out.SessionStore, err = m.Float64Histogram("dsh.session.store.duration", metric.WithDescription("Session store latency, by operation."), metric.WithUnit("s"))
	add(err)
	out.SSESubscribers, err = m.Int64UpDownCounter("dsh.sse.subscribers", metric.WithDescription("Event streams attached over Server-Sent Events."), metric.WithUnit("{subscriber}"))
	add(err)
	return &out, errors.Join(errList...)
}

// M returns the instruments, or nil when telemetry is off.
func M() *Metrics {
	if !on.Load() {
		return nil
	}
	if p := current.Load(); p != nil {
		return p.metrics
	}
	return nil
}

// Count adds 1 to c with attrs when telemetry is on.
func Count(ctx stdctx.Context, pick func(*Metrics) metric.Int64Counter, attrs ...attribute.KeyValue) {
	m := M()
	if m == nil {
		return
	}
	pick(m).Add(ctx, 1, metric.WithAttributes(attrs...))
}

// Seconds records the time since start on the histogram pick chooses.
func Seconds(ctx stdctx.Context, pick func(*Metrics) metric.Float64Histogram, start time.Time, attrs ...attribute.KeyValue) {
	m := M()
	if m == nil {
		return
	}
	pick(m).Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
}
