package telemetry

import (
	stdctx "context"

	"github.com/hashicorp/go-hclog"
)

// Logger returns l with the trace_id and span_id of ctx's span, so the
// lines it writes (in hclog's JSON output, log.json: true) sit beside
// their trace in a backend that joins logs to traces. Off, or with no
// span, it is l itself.
func Logger(ctx stdctx.Context, l hclog.Logger) hclog.Logger {
	args := LogArgs(ctx)
	if args == nil || l == nil {
		return l
	}
	return l.With(args...)
}
