package cluster

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/nats-io/nats.go/jetstream"
)

// Report is what `dsh cluster status` shows: the live hosts with the
// sessions each owns, and leases held in the name of a host that is gone
// (they run out within the lease TTL, and the sessions can then be
// claimed).
type Report struct {
	Hosts []HostStatus `json:"hosts"`
	// Orphaned are leases whose host has no presence entry: it died or
	// left without releasing them, or it never joined (a plain
	// session.nats user).
	Orphaned []Lease `json:"orphaned"`
}

// HostStatus is one live host.
type HostStatus struct {
	HostRecord
	Sessions []Lease `json:"sessions"`
}

// Lease is one held session.
type Lease struct {
	Session string    `json:"session"`
	HostID  string    `json:"host_id,omitempty"`
	Holder  string    `json:"holder"`
	Since   time.Time `json:"since"`
	// Renewed is when the lease was last written; a lease not renewed for
	// longer than the TTL is gone.
	Renewed time.Time `json:"renewed"`
}

// Status reads the presence and lease buckets of the cluster o names.
//
// A server of the cluster going down makes the buckets it led unanswered
// until JetStream elects new leaders, a second or two: a report that
// cannot be read is tried again, with pauses, for StatusPatience (within
// ctx) before the error is returned.
func Status(ctx stdctx.Context, o Options) (Report, error) {
	deadline := time.Now().Add(StatusPatience)
	pause := 100 * time.Millisecond
	for {
		rep, err := status(ctx, o)
		if err == nil || !errs.HasCode(err, Unreachable) || time.Now().Add(pause).After(deadline) {
			return rep, err
		}
		select {
		case <-ctx.Done():
			return rep, err
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}

// StatusPatience bounds how long Status retries a report it cannot read.
const StatusPatience = 20 * time.Second

func status(ctx stdctx.Context, o Options) (Report, error) {
	nc, err := dial(o, "dsh cluster status", "to report its status")
	if err != nil {
		return Report{}, err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return Report{}, unreachable(o, err, "use JetStream")
	}
	ctx, cancel := stdctx.WithTimeout(ctx, o.withDefaults().ConnectTimeout)
	defer cancel()
	var rep Report
	byHost := map[string]int{}
	hosts, err := entries(ctx, js, HostBucket(o.Stream))
	if err != nil {
		return Report{}, unreachable(o, err, "read the bucket "+HostBucket(o.Stream))
	}
	for _, e := range hosts {
		var h HostRecord
		if json.Unmarshal(e.Value(), &h) != nil {
			continue // not a host's entry; skipping it hides nobody live
		}
		byHost[h.HostID] = len(rep.Hosts)
		rep.Hosts = append(rep.Hosts, HostStatus{HostRecord: h, Sessions: []Lease{}})
	}
	leases, err := entries(ctx, js, natsplugin.LeaseBucket(o.Stream))
	if err != nil {
		return Report{}, unreachable(o, err, "read the bucket "+natsplugin.LeaseBucket(o.Stream))
	}
	rep.Orphaned = []Lease{}
	for _, e := range leases {
		var r natsplugin.LeaseRecord
		json.Unmarshal(e.Value(), &r)
		l := Lease{Session: e.Key(), HostID: r.HostID, Holder: r.Holder, Since: r.Since, Renewed: e.Created()}
		if i, ok := byHost[r.HostID]; ok && r.HostID != "" {
			rep.Hosts[i].Sessions = append(rep.Hosts[i].Sessions, l)
		} else {
			rep.Orphaned = append(rep.Orphaned, l)
		}
	}
	sort.Slice(rep.Hosts, func(i, j int) bool { return rep.Hosts[i].HostID < rep.Hosts[j].HostID })
	for _, h := range rep.Hosts {
		sortLeases(h.Sessions)
	}
	sortLeases(rep.Orphaned)
	return rep, nil
}

func sortLeases(ls []Lease) {
	sort.Slice(ls, func(i, j int) bool { return ls[i].Session < ls[j].Session })
}

// entries returns the live entries of a bucket; a bucket not created yet
// (nobody joined, nothing leased) has none.
func entries(ctx stdctx.Context, js jetstream.JetStream, bucket string) ([]jetstream.KeyValueEntry, error) {
	kv, err := js.KeyValue(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	lister, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	var out []jetstream.KeyValueEntry
	for key := range lister.Keys() {
		e, err := kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // gone since the listing
		}
		if err != nil {
			lister.Stop()
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

func unreachable(o Options, err error, what string) error {
	return errs.Wrap(Unreachable, err, fmt.Sprintf(
		"cluster: cannot %s on the NATS server at %s; check that it runs with JetStream (nats-server -js) and that cluster.nats.url and credentials_file are right", what, o.URL))
}
