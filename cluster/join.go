package cluster

import (
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of the Options left zero.
const (
	DefaultStream         = "DSH_SESSIONS"
	DefaultLeaseTTL       = 30 * time.Second
	DefaultConnectTimeout = 5 * time.Second
	DefaultRequestTimeout = 5 * time.Second
)

// Host is this host's membership of a cluster: its presence record, kept
// alive by a heartbeat, and the subscription that serves the requests
// other hosts forward to it. Prompt and Cancel route a session's messages
// to its owner.
type Host struct {
	o      Options
	log    hclog.Logger
	nc     *nats.Conn
	hosts  jetstream.KeyValue
	leases jetstream.KeyValue
	// stream holds the session logs: whether a session exists. Since the
	// stream allows direct gets, which any replica answers, its
	// single-message reads are sent to the leader (natsplugin.LeaderReads);
	// leader makes the reads of queue.go.
	stream jetstream.Stream
	leader natsplugin.LeaderReader
	// queue holds the prompts owners accepted (queue.go); queued are the
	// entries this host stored and will delete.
	queue  jetstream.KeyValue
	queued queueKeys
	// qview is the queue bucket as this host has seen it (queueview.go);
	// nil on a host without an opener. marks numbers its marks.
	qview  *queueView
	marks  atomic.Int64
	record []byte
	sub    *nats.Subscription

	// ctx is what forwarded requests run under; cancelled by Close once
	// their grace is over.
	ctx    stdctx.Context
	cancel stdctx.CancelFunc
	// work counts the forwarded requests being served.
	work sync.WaitGroup
	// drops counts the checks of stale sessions in progress (fence.go).
	drops sync.WaitGroup

	beatStop chan struct{}
	beatDone chan struct{}

	// adoptWatch watches the lease bucket for expiries (adopt.go); nil
	// on a host that claims nothing.
	adoptWatch jetstream.KeyWatcher
	adoptDone  chan struct{}
	orphans    orphans
	adoptWork  sync.WaitGroup // the adopters
	// replies takes the answers to forwarded requests (replies.go).
	replies replies
	// leaseView is the lease bucket as the watch saw it (leasecache.go).
	leaseView leaseCache

	mu     sync.Mutex
	rev    uint64 // revision of the presence record
	closed bool
	// inflight are the claims being resumed, by session id.
	inflight map[string]*claiming
	// relays are the approval relays served here (relay.go).
	relays relays
}

func (o Options) withDefaults() Options {
	if o.Stream == "" {
		o.Stream = DefaultStream
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.SubjectPrefix == "" {
		o.SubjectPrefix = natsplugin.Config{}.Defaults().SubjectPrefix
	}
	return o
}

func (o Options) validate() error {
	bad := func(format string, args ...any) error {
		return errs.New(errs.InvalidArgument, "cluster.Join: "+fmt.Sprintf(format, args...))
	}
	switch {
	case o.URL == "":
		return bad("the NATS url is empty; set cluster.nats.url, e.g. nats://127.0.0.1:4222")
	case !natsplugin.ValidToken(o.HostID):
		return bad("host id %q cannot name a NATS subject token; set cluster.host_id to letters, digits, '_' and '-'", o.HostID)
	case !natsplugin.ValidToken(o.Stream):
		return bad("stream %q is not a JetStream stream name; use letters, digits, '_' and '-'", o.Stream)
	case o.LeaseTTL < time.Second:
		return bad("lease_ttl is %s; use at least 1s, e.g. 30s", o.LeaseTTL)
	case o.ConnectTimeout < 0 || o.RequestTimeout < 0:
		return bad("connect and request timeouts must be positive")
	case o.Replicas != 1 && o.Replicas != 3 && o.Replicas != 5:
		return bad("replicas is %d; JetStream keeps 1, 3 or 5 copies", o.Replicas)
	case o.Sessions == nil:
		return bad("Options.Sessions is nil; pass the host's session controller (host.Sessions())")
	}
	return nil
}

// Join connects this host to the cluster: it announces the host in the
// presence bucket — refused with HostIDTaken while another live host
// announces the same id — and serves the requests other hosts forward to
// it through o.Sessions until Close. session.nats must already run on the
// same stream (its lease bucket says who owns each session).
func Join(ctx stdctx.Context, o Options) (*Host, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	h := &Host{o: o, log: o.Logger, inflight: map[string]*claiming{}}
	if h.log == nil {
		h.log = hclog.NewNullLogger()
	}
	// A host outlives a NATS server's restart: keep reconnecting, the
	// heartbeat and the lease renewals resume once it is back.
	nc, err := dial(o, "dsh cluster host "+o.HostID, fmt.Sprintf("for host %q", o.HostID), nats.MaxReconnects(-1))
	if err != nil {
		return nil, err
	}
	h.nc = nc
	if err := h.setUp(ctx); err != nil {
		nc.Close()
		return nil, err
	}
	return h, nil
}

func (h *Host) setUp(ctx stdctx.Context) error {
	o := h.o
	js, err := jetstream.New(h.nc)
	if err != nil {
		return errs.Wrap(Unreachable, err, "cluster: cannot use JetStream on "+o.URL)
	}
	// Each bucket is created or bound with retry (natsplugin.Ensure):
	// hosts started together race for them on a fresh cluster.
	t := o.ConnectTimeout
	h.leases, err = natsplugin.Ensure(ctx, t, func(ctx stdctx.Context) (jetstream.KeyValue, error) {
		return js.KeyValue(ctx, natsplugin.LeaseBucket(o.Stream))
	})
	if err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"cluster: cannot open the lease bucket %q on %s; session.nats must run on stream %q before the host joins (a cluster: config mounts it)",
			natsplugin.LeaseBucket(o.Stream), o.URL, o.Stream))
	}
	// Who owns a session decides where a request goes: the lease is read
	// from the bucket's leader, never from a replica that may be behind.
	h.leases = natsplugin.LeaderKV(h.leases, h.nc)
	h.leader = natsplugin.NewLeaderReader(h.nc, o.Stream)
	if h.stream, err = natsplugin.Ensure(ctx, t, func(ctx stdctx.Context) (jetstream.Stream, error) { return js.Stream(ctx, o.Stream) }); err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"cluster: cannot open the stream %q on %s; session.nats must run on it before the host joins (a cluster: config mounts it)", o.Stream, o.URL))
	}
	h.stream = natsplugin.LeaderReads(h.stream, h.leader)
	if err := h.openQueue(ctx, js); err != nil {
		return err
	}
	h.hosts, err = natsplugin.Ensure(ctx, t, func(ctx stdctx.Context) (jetstream.KeyValue, error) {
		return natsplugin.BindOrCreateKV(ctx, js, jetstream.KeyValueConfig{
			Bucket:      HostBucket(o.Stream),
			Description: "dsh cluster presence: one entry per live host",
			TTL:         o.LeaseTTL,
			Replicas:    o.Replicas,
			Storage:     jetstream.FileStorage,
		})
	})
	if err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf(
			"cluster: cannot create or update the presence bucket %q on %s; is JetStream enabled (nats-server -js), and do all hosts use the same lease_ttl and replicas?",
			HostBucket(o.Stream), o.URL))
	}
	tctx, cancel := stdctx.WithTimeout(ctx, o.ConnectTimeout)
	defer cancel()
	name, _ := os.Hostname()
	h.record, _ = json.Marshal(HostRecord{HostID: o.HostID, Group: o.Group, Hostname: name, PID: os.Getpid(),
		Started: time.Now().UTC(), API: o.API})
	// Announced before subscribing: two hosts with one id must never both
	// serve its route subject, where both would answer every request.
	h.rev, err = h.hosts.Create(tctx, o.HostID, h.record)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return h.taken(tctx)
	}
	if err != nil {
		return errs.Wrap(Unreachable, err, fmt.Sprintf("cluster: cannot announce host %q in bucket %q on %s", o.HostID, HostBucket(o.Stream), o.URL))
	}
	h.ctx, h.cancel = stdctx.WithCancel(stdctx.Background())
	err = h.replies.open(h.nc)
	if err == nil {
		h.sub, err = h.nc.Subscribe(RouteSubject(o.Stream, o.HostID), h.take)
	}
	if err == nil {
		// The subscription is known to the server once Join returns, so a
		// host that reads the presence record can reach this one.
		err = h.nc.FlushWithContext(tctx)
	}
	if err != nil {
		h.cancel()
		_ = h.hosts.Delete(stdctx.Background(), o.HostID, jetstream.LastRevision(h.rev))
		return errs.Wrap(Unreachable, err, fmt.Sprintf("cluster: cannot subscribe to %s on %s", RouteSubject(o.Stream, o.HostID), o.URL))
	}
	if err := h.watch(); err != nil {
		h.cancel()
		h.sub.Unsubscribe()
		_ = h.hosts.Delete(stdctx.Background(), o.HostID, jetstream.LastRevision(h.rev))
		return err
	}
	h.beatStop, h.beatDone = make(chan struct{}), make(chan struct{})
	go h.heartbeat()
	return nil
}

// watch starts the view of the queue bucket on a host that may resume
// sessions — if only for a forwarded request — and the adoption of
// expired leases on one that claims them.
func (h *Host) watch() error {
	if h.o.Open == nil {
		return nil
	}
	if err := h.watchQueue(h.ctx); err != nil {
		return err
	}
	if !h.claims(request{}) {
		return nil
	}
	if err := h.watchLeases(h.ctx); err != nil {
		h.qview.stop(true)
		return err
	}
	return nil
}

// taken is the refusal of a host id a live host announces.
func (h *Host) taken(ctx stdctx.Context) error {
	who := "another live host"
	if e, err := h.hosts.Get(ctx, h.o.HostID); err == nil {
		var r HostRecord
		if json.Unmarshal(e.Value(), &r) == nil {
			who = fmt.Sprintf("process %d on %q (started %s)", r.PID, r.Hostname, r.Started.Format(time.RFC3339))
		}
	}
	return errs.New(HostIDTaken, fmt.Sprintf(
		"cluster: host id %q is announced by %s in bucket %q; give this host another cluster.host_id, or, if that host died, wait for its entry to expire (lease_ttl %s)",
		h.o.HostID, who, HostBucket(h.o.Stream), h.o.LeaseTTL))
}

// heartbeat renews the presence record every third of the TTL, so it
// expires only when the host stops renewing it.
func (h *Host) heartbeat() {
	defer close(h.beatDone)
	t := time.NewTicker(h.o.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-h.beatStop:
			return
		case <-t.C:
		}
		h.beat()
		h.sweepStale()
	}
}

func (h *Host) beat() {
	ctx, cancel := stdctx.WithTimeout(h.ctx, h.o.ConnectTimeout)
	defer cancel()
	h.mu.Lock()
	rev := h.rev
	h.mu.Unlock()
	next, err := h.hosts.Update(ctx, h.o.HostID, h.record, rev)
	if natsplugin.RevisionConflict(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
		// The entry expired (this host stalled longer than the TTL, or
		// the server was away): announce again, unless another host took
		// the id meanwhile.
		next, err = h.hosts.Create(ctx, h.o.HostID, h.record)
		if errors.Is(err, jetstream.ErrKeyExists) {
			h.log.Error("cluster: another host announces this host id; requests for this host may reach it", "host_id", h.o.HostID)
			return
		}
	}
	if err != nil {
		// Retried at the next tick; a server briefly away is no reason to
		// leave the cluster.
		h.log.Warn("cluster: cannot renew the presence record", "host_id", h.o.HostID, "error", err)
		return
	}
	h.mu.Lock()
	h.rev = next
	h.mu.Unlock()
}

// Connected reports whether the host's connection to NATS is up.
func (h *Host) Connected() bool { return h.nc.IsConnected() }

// ID returns the host id.
func (h *Host) ID() string { return h.o.HostID }

// Close leaves the cluster: it stops taking forwarded requests, lets the
// ones in flight finish until ctx ends (then cancels them), stops the
// heartbeat, deletes the presence record and closes the connection. The
// host's sessions stay open; their leases still name this host.
func (h *Host) Close(ctx stdctx.Context) error {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil
	}
	h.closed = true
	h.mu.Unlock()
	var failed []error
	// Drained, not dropped: a request already delivered to this host is
	// answered (closed is set: "leaving, retry") instead of left to time
	// out at its sender.
	if err := h.sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		failed = append(failed, errs.Wrap(Unreachable, err, "cluster: cannot unsubscribe from "+h.sub.Subject))
	}
	for h.sub.IsValid() && h.nc.IsConnected() && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	idle := make(chan struct{})
	go func() { h.work.Wait(); close(idle) }()
	select {
	case <-idle:
	case <-ctx.Done():
		h.cancel()
		<-idle
	}
	h.cancel()
	h.stopAdopting()
	if h.qview != nil {
		h.qview.stop(h.nc.IsConnected())
	}
	close(h.beatStop)
	<-h.beatDone
	h.drops.Wait()
	dctx, cancel := stdctx.WithTimeout(stdctx.WithoutCancel(ctx), h.o.ConnectTimeout)
	defer cancel()
	h.mu.Lock()
	rev := h.rev
	h.mu.Unlock()
	// With the server away the entry expires by itself within lease_ttl;
	// waiting for it would only eat the caller's shutdown budget.
	if !h.nc.IsConnected() {
		h.nc.Close()
		return errors.Join(failed...)
	}
	if err := h.hosts.Delete(dctx, h.o.HostID, jetstream.LastRevision(rev)); err != nil && !natsplugin.RevisionConflict(err) {
		failed = append(failed, errs.Wrap(Unreachable, err, fmt.Sprintf("cluster: cannot delete the presence record of host %q; it expires within lease_ttl (%s)", h.o.HostID, h.o.LeaseTTL)))
	}
	h.nc.Close()
	return errors.Join(failed...)
}
