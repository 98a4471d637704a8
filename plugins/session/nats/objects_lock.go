package nats

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/nats-io/nats.go/jetstream"
)

// LockBucket is the key-value bucket whose one entry is the lock of the
// attachments store of stream's sessions.
func LockBucket(stream string) string { return stream + "_ATTACHMENT_LOCK" }

// lockKey is the lock's one entry.
const lockKey = "lock"

// clusterLock is the attachments store's lock across hosts: an entry
// created only if absent, renewed every third of the bucket's TTL while
// held, deleted at unlock. The TTL (lease_ttl) frees the lock of a host
// that died holding it; until then the others wait. Within one process a
// mutex queues the takers, so they do not poll the bucket against each
// other.
type clusterLock struct {
	kv     jetstream.KeyValue
	ttl    time.Duration
	value  []byte
	wait   time.Duration
	local  sync.Mutex
	closed chan struct{}
	once   sync.Once
}

// lockHolder is the value of the lock entry, for the error of a host that
// waited too long.
type lockHolder struct {
	Holder string `json:"holder"`
}

func openLock(ctx stdctx.Context, js jetstream.JetStream, cfg Config, holder string) (*clusterLock, error) {
	kv, err := Ensure(ctx, cfg.ConnectTimeout, func(ctx stdctx.Context) (jetstream.KeyValue, error) {
		if _, err := BindOrCreateKV(ctx, js, jetstream.KeyValueConfig{
			Bucket:      LockBucket(cfg.Stream),
			Description: "dsh attachments: the lock of marker and blob changes",
			TTL:         cfg.LeaseTTL,
			Storage:     jetstream.FileStorage,
			Replicas:    max(cfg.Replicas, 1),
		}); err != nil {
			return nil, err
		}
		// A holder read stale from a replica would only name the wrong
		// host in an error, but a create that falls back on a read should
		// not wait on one.
		if err := leaderReads(ctx, js, "KV_"+LockBucket(cfg.Stream)); err != nil {
			return nil, err
		}
		return js.KeyValue(ctx, LockBucket(cfg.Stream))
	})
	if err != nil {
		return nil, err
	}
	value, _ := json.Marshal(lockHolder{Holder: holder})
	return &clusterLock{
		kv: kv, ttl: cfg.LeaseTTL, value: value,
		// A holder collecting at its start may keep the lock a while;
		// one that died keeps it for the TTL.
		wait:   max(4*cfg.LeaseTTL, time.Minute),
		closed: make(chan struct{}),
	}, nil
}

// acquire takes the lock, waiting at most l.wait for another holder.
func (l *clusterLock) acquire() (func(), error) {
	l.local.Lock()
	deadline := time.Now().Add(l.wait)
	pause := 2 * time.Millisecond
	var rev uint64
	for {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), l.ttl/3)
		var err error
		rev, err = l.kv.Create(ctx, lockKey, l.value)
		cancel()
		if err == nil {
			break
		}
		if !errors.Is(err, jetstream.ErrKeyExists) || time.Now().After(deadline) {
			l.local.Unlock()
			return nil, l.failed(err)
		}
		select {
		case <-l.closed:
			l.local.Unlock()
			return nil, errs.New(attachments.StoreFailed, "attachments: the JetStream attachments store is closed")
		case <-time.After(pause/2 + rand.N(pause)):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	revc := make(chan uint64, 1)
	go l.renew(rev, stop, done, revc)
	var once sync.Once
	return func() {
		once.Do(func() {
			close(stop)
			<-done
			last := <-revc
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), l.ttl/3)
			defer cancel()
			// Only this hold's entry: after a renewal failed for a whole
			// TTL another host may hold the lock now. A delete that fails
			// leaves the entry to the TTL.
			l.kv.Delete(ctx, lockKey, jetstream.LastRevision(last))
			l.local.Unlock()
		})
	}, nil
}

// renew rewrites the entry every third of the TTL until stop, then sends
// the entry's last revision.
func (l *clusterLock) renew(rev uint64, stop <-chan struct{}, done chan<- struct{}, revc chan<- uint64) {
	defer close(done)
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			revc <- rev
			return
		case <-t.C:
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), l.ttl/3)
			if r, err := l.kv.Update(ctx, lockKey, l.value, rev); err == nil {
				rev = r
			}
			cancel()
		}
	}
}

// failed explains a lock that could not be taken: who holds it, when the
// wait ran out.
func (l *clusterLock) failed(err error) error {
	if !errors.Is(err, jetstream.ErrKeyExists) {
		return errs.Wrap(attachments.StoreFailed, err, fmt.Sprintf(
			"attachments: cannot take the lock of the JetStream attachments store (bucket %s); check that the NATS servers are reachable", l.kv.Bucket())).WithReason(attachments.ReasonUnreachable)
	}
	who := "another host"
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), l.ttl/3)
	defer cancel()
	if e, gerr := l.kv.Get(ctx, lockKey); gerr == nil {
		var h lockHolder
		if json.Unmarshal(e.Value(), &h) == nil && h.Holder != "" {
			who = h.Holder
		}
	}
	return errs.New(attachments.StoreFailed, fmt.Sprintf(
		"attachments: %s held the lock of the JetStream attachments store (bucket %s) for all of %s; retry, and if it stays, check that host (a holder that died frees it within lease_ttl, %s)",
		who, l.kv.Bucket(), l.wait, l.ttl)).WithReason(attachments.ReasonLockBusy)
}

// close ends the waits for the lock.
func (l *clusterLock) close() { l.once.Do(func() { close(l.closed) }) }
