package nats

import (
	stdctx "context"
	"errors"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// SetUpPatience bounds how long a host keeps trying to create or bind its
// stream and buckets. Hosts started together on a fresh cluster race to
// create the same replicated stream while the servers may still be
// electing their JetStream leader: requests time out, or are refused as
// "insufficient resources" or "name already in use" for a moment. Each
// attempt is bounded by connect_timeout; the whole by this.
const SetUpPatience = 30 * time.Second

// Ensure calls create — a create-or-update, or a bind, of one stream or
// bucket — until it succeeds, ctx ends or SetUpPatience (at least one
// attempt of timeout) has passed, pausing a little longer after each
// failure. Any failure is retried: on a fresh cluster even "not enabled"
// and "insufficient resources" are transient, and a config that can never
// be created still fails, with create's last error, once patience runs out.
func Ensure[T any](ctx stdctx.Context, timeout time.Duration, create func(stdctx.Context) (T, error)) (T, error) {
	deadline := time.Now().Add(max(SetUpPatience, timeout))
	pause := 50 * time.Millisecond
	for {
		actx, cancel := stdctx.WithTimeout(ctx, timeout)
		v, err := create(actx)
		cancel()
		if err == nil {
			return v, nil
		}
		// Jitter, so hosts started together do not retry in step.
		wait := pause/2 + rand.N(pause)
		if ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = errors.Join(err, ctx.Err())
			}
			return v, err
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		pause = min(2*pause, time.Second)
	}
}

// BindOrCreateKV binds the bucket cfg names when it exists with cfg's TTL,
// replicas and limit markers, and creates or updates it otherwise. Binding first keeps
// hosts that start together from sending the same create at once, which
// a cluster may leave unanswered while it settles the first.
func BindOrCreateKV(ctx stdctx.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.KeyValue(ctx, cfg.Bucket)
	if err == nil {
		st, serr := kv.Status(ctx)
		if serr == nil && st.TTL() == cfg.TTL {
			if info, ok := st.(*jetstream.KeyValueBucketStatus); ok {
				have := info.StreamInfo().Config
				if have.Replicas == max(cfg.Replicas, 1) && have.SubjectDeleteMarkerTTL == cfg.LimitMarkerTTL {
					return kv, nil
				}
			}
		}
	} else if !errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, err
	}
	return js.CreateOrUpdateKeyValue(ctx, cfg)
}

// BindOrCreateStream is BindOrCreateKV for a stream: bound when it exists
// with cfg's subjects and replicas.
func BindOrCreateStream(ctx stdctx.Context, js jetstream.JetStream, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	st, err := js.Stream(ctx, cfg.Name)
	if err == nil {
		have := st.CachedInfo().Config
		if have.Replicas == max(cfg.Replicas, 1) && slices.Equal(have.Subjects, cfg.Subjects) && have.AllowDirect == cfg.AllowDirect &&
			(have.AllowAtomicPublish || !cfg.AllowAtomicPublish) {
			return st, nil
		}
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, err
	}
	return js.CreateOrUpdateStream(ctx, cfg)
}
