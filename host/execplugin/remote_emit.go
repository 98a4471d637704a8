package execplugin

import (
	stdctx "context"
	"errors"
	"sync"
	"time"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/sdk"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/agentloop"
	"github.com/hashicorp/go-hclog"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// streamChunkEvent is the notification that comes by the token.
var streamChunkEvent = agentloop.EventStreamChunk.Name()

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
func (d *dropCounter) drop(log hclog.Logger, e config.Entry, event string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total++
	d.unreported++
	if now := time.Now(); d.reported.IsZero() || now.Sub(d.reported) >= dropReportEvery {
		d.report(log, e, event)
		d.reported = now
	}
}

func (d *dropCounter) report(log hclog.Logger, e config.Entry, event string) {
	log.Warn("plugin is behind on notifications; they were dropped, not delivered later",
		"plugin", e.ID, "dropped", d.unreported, "dropped_total", d.total, "queue", emitQueue, "last_event", event)
	d.unreported = 0
}

// flush reports what was dropped since the last report.
func (d *dropCounter) flush(log hclog.Logger, e config.Entry) {
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
		if len(r.emits) >= chunkBatch {
			// A lingering batch is full enough: end the wait.
			select {
			case r.emitsFull <- struct{}{}:
			default:
			}
		}
	default:
		r.drops.drop(r.log, r.entry, req.Event)
	}
}

// Batching bounds, for a plugin that accepts EmitBatch: what is queued
// when the sender wakes goes in one message, up to maxBatch notifications
// or maxBatchBytes (a gRPC message is 4 MB at most by default, and session
// events carry whole messages); and while the last of it is a stream chunk
// the sender waits once, up to chunkLinger, or until chunkBatch
// notifications are queued, whichever comes first, and takes what came. So a streamed answer costs a message
// per few dozen tokens, not one per token, and a chunk is never later than
// chunkLinger for it.
const (
	chunkLinger   = 5 * time.Millisecond
	chunkBatch    = 64
	maxBatch      = emitQueue
	maxBatchBytes = 1 << 20
)

// sendEmits delivers queued notifications in order until stop: in batches
// to a plugin that accepts them, one Emit each to any other.
func (r *remote) sendEmits() {
	defer close(r.emitDone)
	var carry *pluginv1.EmitRequest // taken from the queue, too big for the last batch
	for {
		req := carry
		carry = nil
		if req == nil {
			select {
			case <-r.stop:
				return
			case req = <-r.emits:
			}
		}
		rpc, batch := r.emitter()
		if rpc == nil {
			continue // down: a notification is not worth waiting for
		}
		if !batch {
			r.emitOne(rpc, req)
			continue
		}
		var pending []*pluginv1.EmitRequest
		var stopped bool
		pending, carry, stopped = r.gather(req)
		if stopped {
			return
		}
		r.emitBatch(rpc, pending)
	}
}

// emitter returns the live client and whether it takes batches.
func (r *remote) emitter() (pluginv1.PluginClient, bool) {
	r.mu.Lock()
	batch := r.batch
	r.mu.Unlock()
	return r.current(), batch
}

func isChunk(req *pluginv1.EmitRequest) bool { return req.Event == streamChunkEvent }

// gather collects a batch that starts with first. carry is a notification
// it took from the queue that would make the batch too big: it starts the
// next one. stopped says dsh is stopping and the batch is abandoned, as
// queued notifications are.
func (r *remote) gather(first *pluginv1.EmitRequest) (pending []*pluginv1.EmitRequest, carry *pluginv1.EmitRequest, stopped bool) {
	pending = append(make([]*pluginv1.EmitRequest, 0, 16), first)
	size := proto.Size(first)
	chunks := 0
	if isChunk(first) {
		chunks++
	}
	var linger *time.Timer
	defer func() {
		if linger != nil {
			linger.Stop()
		}
	}()
	for len(pending) < maxBatch {
		var req *pluginv1.EmitRequest
		select {
		case req = <-r.emits:
		default:
			// Nothing queued: only a stream in progress is worth a wait.
			if !isChunk(pending[len(pending)-1]) || chunks >= chunkBatch {
				return pending, nil, false
			}
			if linger != nil {
				return pending, nil, false // lingered once, and took what came
			}
			// The wait does not take chunks one by one: a wake-up per
			// token is most of what a stream costs the host. It ends
			// when chunkLinger passed or chunkBatch are queued.
			select {
			case <-r.emitsFull: // stale: from before this batch
			default:
			}
			linger = time.NewTimer(chunkLinger)
			if len(r.emits) >= chunkBatch {
				continue
			}
			select {
			case <-r.emitsFull:
			case <-linger.C:
			case <-r.stop:
				return nil, nil, true
			}
			continue
		}
		if size += proto.Size(req); size > maxBatchBytes {
			return pending, req, false
		}
		pending = append(pending, req)
		if isChunk(req) {
			chunks++
		}
	}
	return pending, nil, false
}

// emitTimeout bounds one Emit or EmitBatch.
func (r *remote) emitTimeout() time.Duration { return max(r.callTimeout(), 10*time.Second) }

func (r *remote) emitOne(rpc pluginv1.PluginClient, req *pluginv1.EmitRequest) {
	ctx, cancel := stdctx.WithTimeout(r.stopCtx, r.emitTimeout())
	res, err := rpc.Emit(ctx, req)
	cancel()
	if err == nil && res.Error != nil {
		err = sdk.ErrorFromProto(res.Error)
	}
	if err != nil {
		r.log.Warn("plugin failed a notification", "event", req.Event, "error", err)
	}
}

// emitBatch sends pending in one EmitBatch and logs what failed, by event.
// A plugin that announced emit-batch yet does not implement it gets single
// Emits from then on, this batch included.
func (r *remote) emitBatch(rpc pluginv1.PluginClient, pending []*pluginv1.EmitRequest) {
	ctx, cancel := stdctx.WithTimeout(r.stopCtx, r.emitTimeout())
	req := &pluginv1.EmitBatchRequest{Emits: pending}
	var res *pluginv1.EmitBatchResponse
	err := errMuxBroken
	if m := r.currentMux(); m != nil {
		res, err = m.emitBatch(ctx, req)
	}
	if errors.Is(err, errMuxBroken) {
		res, err = rpc.EmitBatch(ctx, req)
	}
	cancel()
	if status.Code(err) == codes.Unimplemented {
		r.log.Warn("plugin accepts emit-batch but does not implement EmitBatch; sending it single notifications", "error", err)
		r.mu.Lock()
		r.batch = false
		r.mu.Unlock()
		for _, req := range pending {
			r.emitOne(rpc, req)
		}
		return
	}
	if err != nil {
		r.log.Warn("plugin failed a batch of notifications", "count", len(pending), "first_event", pending[0].Event, "error", err)
		return
	}
	for _, f := range res.GetFailures() {
		event := "?"
		if i := int(f.GetIndex()); i < len(pending) {
			event = pending[i].Event
		}
		r.log.Warn("plugin failed a notification", "event", event, "index", f.GetIndex(), "error", sdk.ErrorFromProto(f.GetError()))
	}
}
