package telemetry_test

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/telemetry"
	"github.com/dsh-go/dsh/telemetry/provider"
	"github.com/hashicorp/go-hclog"
)

type logLine struct {
	TraceID string `json:"trace_id"`
	SpanID  string `json:"span_id"`
}

func lines(t *testing.T, buf *bytes.Buffer) []logLine {
	t.Helper()
	var out []logLine
	for _, s := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l logLine
		if err := json.Unmarshal([]byte(s), &l); err != nil {
			t.Fatalf("not a JSON line: %q", s)
		}
		out = append(out, l)
	}
	buf.Reset()
	return out
}

// A line logged under a span, through hclog's Logger or slog's
// SlogHandler, carries the span's trace_id and span_id in the JSON output;
// one logged without a span, or with telemetry off, carries none.
func TestLogsCarryTheSpan(t *testing.T) {
	var hbuf, sbuf bytes.Buffer
	hl := hclog.New(&hclog.LoggerOptions{Output: &hbuf, JSONFormat: true})
	sl := slog.New(telemetry.SlogHandler(slog.NewJSONHandler(&sbuf, nil)))
	logBoth := func(ctx stdctx.Context) (logLine, logLine) {
		telemetry.Logger(ctx, hl).Info("under a span")
		sl.InfoContext(ctx, "under a span")
		return lines(t, &hbuf)[0], lines(t, &sbuf)[0]
	}

	p, err := provider.Setup(stdctx.Background(), telemetry.Config{Enabled: on()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := telemetry.Start(stdctx.Background(), "work")
	want := logLine{span.SpanContext().TraceID().String(), span.SpanContext().SpanID().String()}
	if h, s := logBoth(ctx); h != want || s != want {
		t.Fatalf("hclog %+v, slog %+v; want %+v", h, s, want)
	}
	span.End()
	if h, s := logBoth(stdctx.Background()); h != (logLine{}) || s != (logLine{}) {
		t.Fatalf("without a span: hclog %+v, slog %+v; want no ids", h, s)
	}
	p.Shutdown(stdctx.Background())
	if h, s := logBoth(ctx); h != (logLine{}) || s != (logLine{}) {
		t.Fatalf("off: hclog %+v, slog %+v; want no ids", h, s)
	}
}
