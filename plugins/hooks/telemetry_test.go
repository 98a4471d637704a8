package hooks_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestHookRunsInTheTrace: with telemetry on, a hook is a dsh.hook span of
// the trace that fired it, and its command finds that span in TRACEPARENT
// (so an OpenTelemetry-aware script continues the trace).
func TestHookRunsInTheTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	on := true
	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: &on}, provider.WithSpanProcessor(rec))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(stdctx.Background())
	r := newRig(t)
	out := filepath.Join(r.dir, "traceparent")
	r.start(map[string]any{
		"plugins": []any{
			map[string]any{"use": "llm.scripted"},
			map[string]any{"use": "hooks.command", "config": map[string]any{"hooks": map[string]any{"PreToolUse": []any{
				map[string]any{"matcher": "Bash", "hooks": []any{map[string]any{"type": "command", "command": `printf %s "$TRACEPARENT" > ` + out}}},
			}}}},
		},
		"agents": []any{scriptedAgent("main", nil)},
	})
	r.registerFake("bash")
	svc, _ := tools.Key.Get(r.h.Root())
	a := r.agent("main")
	ctx, root := telemetry.Start(stdctx.Background(), "test")
	call := tools.Call{AgentID: "main", ID: "call-1", Name: "bash", Arguments: json.RawMessage(`{"command":"ls"}`), Workspace: r.ws}
	if _, err := tools.EventApprove.Dispatch(ctx, a.Context(), tools.Approval{Call: call, Tool: svc.Lookup(a.Context(), "bash")}); err != nil {
		t.Fatal(err)
	}
	root.End()
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var hook sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "dsh.hook PreToolUse" {
			hook = s
		}
	}
	if hook == nil {
		t.Fatalf("no dsh.hook span among %d", len(rec.Ended()))
	}
	want := "00-" + root.SpanContext().TraceID().String() + "-" + hook.SpanContext().SpanID().String() + "-01"
	if string(data) != want {
		t.Fatalf("the hook saw TRACEPARENT=%q; want %q (its own span in the test's trace)", data, want)
	}
	if hook.Parent().TraceID() != root.SpanContext().TraceID() || !strings.Contains(attr(hook, "dsh.hook"), "hooks.PreToolUse[0]") {
		t.Fatalf("the hook span: parent %v, attributes %v", hook.Parent(), hook.Attributes())
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}
