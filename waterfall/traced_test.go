package waterfall_test

import (
	stdctx "context"
	"testing"
	"time"

	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	"github.com/dsh-go/dsh/waterfall"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"
)

// A traced event's listeners each get a span under the dispatch's when
// its trace is recorded — with how long the listener held the payload
// and whether it passed it on — and none when the dispatch's trace is
// sampled out: the dispatch decides once, and every hop follows.
func TestTracedListenersFollowTheDispatchsSampling(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	on, ratio := true, 1.0
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: &on, Sampling: &ratio}, provider.WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(stdctx.Background())

	root := quietRoot(t)
	w := waterfall.New("test/traced", identity).Traced()
	holder := func(ctx stdctx.Context, p []string, next waterfall.Next[[]string, []string]) ([]string, error) {
		time.Sleep(3 * time.Millisecond)
		return next.Call(ctx, append(p, "held"))
	}
	// The holder runs first; the second listener's next reaches the
	// default.
	if _, err := w.On(root, holder); err != nil {
		t.Fatal(err)
	}
	if _, err := w.On(root, tracer("passed")); err != nil {
		t.Fatal(err)
	}

	ctx, parent := telemetry.Start(stdctx.Background(), "dispatch")
	got, err := w.Dispatch(ctx, root, nil)
	parent.End()
	if err != nil || len(got) != 2 {
		t.Fatalf("dispatch: %v %v", got, err)
	}
	var listeners []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() != "dispatch" {
			listeners = append(listeners, s)
		}
	}
	if len(listeners) != 2 {
		t.Fatalf("%d listener spans; want 2", len(listeners))
	}
	// The outer listener (the holder) ends last; the inner is its child.
	inner, outer := listeners[0], listeners[1]
	if outer.Parent().SpanID() != parent.SpanContext().SpanID() || inner.Parent().SpanID() != outer.SpanContext().SpanID() {
		t.Fatalf("listener spans are not nested under the dispatch's")
	}
	attrs := map[string]any{}
	for _, kv := range outer.Attributes() {
		attrs[string(kv.Key)] = kv.Value.AsInterface()
	}
	if attrs["dsh.listener.passed"] != true || attrs["dsh.listener.held_seconds"].(float64) < 0.003 {
		t.Fatalf("the holding listener's span says %v", attrs)
	}

	// A sampled-out trace: the listeners run, no span is recorded.
	n := len(rec.Ended())
	out := oteltrace.ContextWithRemoteSpanContext(stdctx.Background(), oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
		TraceID: oteltrace.TraceID{1}, SpanID: oteltrace.SpanID{1}}))
	if got, err := w.Dispatch(out, root, nil); err != nil || len(got) != 2 {
		t.Fatalf("sampled-out dispatch: %v %v", got, err)
	}
	if len(rec.Ended()) != n {
		t.Fatalf("a sampled-out dispatch recorded %d spans", len(rec.Ended())-n)
	}
}
