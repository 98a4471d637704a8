package host

import (
	stdctx "context"
	"sync"
	"time"

	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
)

// emitQueue is how many notifications wait for a plugin that is behind;
// more are dropped, counted and reported.
const emitQueue = 1024

// dropReportEvery spaces the warnings about dropped notifications, so a
// plugin that stays behind does not flood the log.
const dropReportEvery = 10 * time.Second

// dropCounter counts the notifications a plugin lost and reports them: the
// first drop at once, then at most one warning per dropReportEvery with the
// count since the last, and what is left unreported when the plugin stops.
type dropCounter struct {
	mu         sync.Mutex
	total      int
	unreported int
	reported   time.Time
}

// drop counts one and reports when the last report is old enough.
func (d *dropCounter) drop(log hclog.Logger, e Entry, event string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total++
	d.unreported++
	if now := time.Now(); d.reported.IsZero() || now.Sub(d.reported) >= dropReportEvery {
		d.report(log, e, event)
		d.reported = now
	}
}

func (d *dropCounter) report(log hclog.Logger, e Entry, event string) {
	log.Warn("plugin is behind on notifications; they were dropped, not delivered later",
		"plugin", e.ID, "dropped", d.unreported, "dropped_total", d.total, "queue", emitQueue, "last_event", event)
	d.unreported = 0
}

// flush reports what was dropped since the last report.
func (d *dropCounter) flush(log hclog.Logger, e Entry) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.unreported > 0 {
		d.report(log, e, "")
	}
}

// Total is every notification dropped so far.
func (d *dropCounter) Total() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.total
}

// enqueueEmit queues a notification; when the queue is full the
// notification is dropped and counted rather than block the emitter.
func (r *remote) enqueueEmit(req *pluginv1.EmitRequest) {
	select {
	case r.emits <- req:
	default:
		r.drops.drop(r.log, r.entry, req.Event)
	}
}

// sendEmits delivers queued notifications in order until stop.
func (r *remote) sendEmits() {
	defer close(r.emitDone)
	for {
		select {
		case <-r.stop:
			return
		case req := <-r.emits:
			rpc := r.current()
			if rpc == nil {
				continue // down: a notification is not worth waiting for
			}
			ctx, cancel := stdctx.WithTimeout(r.stopCtx, max(r.callTimeout(), 10*time.Second))
			res, err := rpc.Emit(ctx, req)
			cancel()
			if err == nil && res.Error != nil {
				err = sdk.ErrorFromProto(res.Error)
			}
			if err != nil {
				r.log.Warn("plugin failed a notification", "event", req.Event, "error", err)
			}
		}
	}
}
