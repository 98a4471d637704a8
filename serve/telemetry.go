package serve

import (
	stdctx "context"

	"github.com/dsh-go/dsh/telemetry"
)

// subscribed counts an attached event stream in dsh.sse.subscribers until
// the returned func runs.
func subscribed(ctx stdctx.Context) func() {
	m := telemetry.M()
	if m == nil {
		return func() {}
	}
	m.SSESubscribers.Add(1)
	return func() { m.SSESubscribers.Add(-1) }
}
