package cluster

import (
	stdctx "context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Every host of a cluster runs the same schedules (serve.schedules), each
// from its own clock and state file. So that a scheduled time runs once
// across them, a host claims it before running it (schedule.Options.Claim):
// the fires bucket keeps, per schedule, the latest time claimed and the
// host that claimed it, and a claim is a compare-and-set on that entry —
// it wins only if its time is later than the one stored, and only one of
// the hosts racing for a time can replace a given revision.
//
// One entry per schedule, not one per scheduled time: the bucket's size is
// the number of schedules, with no TTL to choose, and a host that wakes
// late (a catch-up at start, a stalled loop) cannot run a time another
// host has passed, however long ago that was.

// FiresBucket is the key-value bucket of the schedules' latest claimed
// runs, for the hosts sharing stream.
func FiresBucket(stream string) string { return stream + "_FIRES" }

// Fires claims scheduled runs for one host. Close it when the scheduler
// stopped.
type Fires struct {
	nc   *nats.Conn
	kv   jetstream.KeyValue
	host string
}

// fired is an entry of the fires bucket.
type fired struct {
	At   time.Time `json:"at"`
	Host string    `json:"host"`
}

// OpenFires connects to the cluster's engine and creates or binds the
// fires bucket, retrying while a fresh cluster settles (natsplugin.Ensure).
func OpenFires(ctx stdctx.Context, o Options) (*Fires, error) {
	nc, err := dial(o, "dsh schedules "+o.HostID, "to claim scheduled runs")
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, errs.Wrap(Unreachable, err, "cluster: cannot use JetStream on "+o.URL+" to claim scheduled runs")
	}
	timeout := o.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	kv, err := natsplugin.Ensure(ctx, timeout, func(ctx stdctx.Context) (jetstream.KeyValue, error) {
		return natsplugin.BindOrCreateKV(ctx, js, jetstream.KeyValueConfig{
			Bucket:      FiresBucket(o.Stream),
			Description: "dsh schedules: the latest run claimed of each, and by which host",
			Replicas:    max(o.Replicas, 1),
			Storage:     jetstream.FileStorage,
		})
	})
	if err != nil {
		nc.Close()
		return nil, errs.Wrap(Unreachable, err, fmt.Sprintf(
			"cluster: cannot create or bind the schedules' bucket %q on %s; is JetStream enabled, and are replicas (%d) at most the cluster's size?", FiresBucket(o.Stream), o.URL, max(o.Replicas, 1)))
	}
	// Its reads may come from a replica behind the leader (a direct get):
	// a claim is decided by the create or update that follows, which the
	// leader refuses when the entry changed, so a stale read costs a
	// retry, never a second run. A leader read would instead wait out a
	// bucket's election, which a claim must retry through (Claim).
	return &Fires{nc: nc, kv: kv, host: o.HostID}, nil
}

// settleFor bounds how long a claim waits for a replicated bucket to
// elect its leader.
const settleFor = 5 * time.Second

// Claim reports whether this host runs the run of schedule name due at
// at: true for the one host whose claim replaced an earlier time, false
// when another host claimed at or a later time first. A schedule.ClaimFunc.
func (f *Fires) Claim(ctx stdctx.Context, name string, at time.Time) (bool, error) {
	key := base64.RawURLEncoding.EncodeToString([]byte(name))
	val, err := json.Marshal(fired{At: at, Host: f.host})
	if err != nil {
		return false, errs.Wrap(errs.Internal, err, "cluster: encoding a schedule's claim")
	}
	// A replicated bucket that was just created, or lost its leader,
	// answers no one for a moment while its leader is elected: a claim
	// failing then would skip the run, so it retries for that long.
	settle := time.Now().Add(settleFor)
	electing := func(err error) bool {
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(settle) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(50 * time.Millisecond):
			return true
		}
	}
	for {
		e, err := f.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			if _, err = f.kv.Create(ctx, key, val); errors.Is(err, jetstream.ErrKeyExists) {
				continue // another host claimed first: compare with its time
			}
			if electing(err) {
				continue
			}
			if err != nil {
				return false, f.failed(err, name, at)
			}
			return true, nil
		}
		if electing(err) {
			continue
		}
		if err != nil {
			return false, f.failed(err, name, at)
		}
		var last fired
		if err := json.Unmarshal(e.Value(), &last); err != nil {
			// Not an entry of this code: replaced, as if it were older.
			last = fired{}
		}
		if !at.After(last.At) {
			return false, nil
		}
		if _, err = f.kv.Update(ctx, key, val, e.Revision()); natsplugin.RevisionConflict(err) || electing(err) {
			continue // replaced meanwhile (compare with the new time), or electing
		}
		if err != nil {
			return false, f.failed(err, name, at)
		}
		return true, nil
	}
}

func (f *Fires) failed(err error, name string, at time.Time) error {
	return errs.Wrap(Unreachable, err, fmt.Sprintf(
		"cluster: cannot claim the run of schedule %q at %s in the bucket %s; check that the NATS servers are reachable", name, at.Format(time.RFC3339), f.kv.Bucket())).
		WithReason("cluster/schedule-claim")
}

// Close closes the connection; claims in flight fail.
func (f *Fires) Close() error {
	f.nc.Close()
	return nil
}
