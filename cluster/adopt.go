package cluster

import (
	stdctx "context"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats.go/jetstream"
)

// A lease that runs out — rather than being released — means its host
// died or stalled past lease_ttl with the session open: clients of that
// session are waiting for it. Every host that may claim sessions watches
// the lease bucket and resumes such a session at once, instead of leaving
// it closed until a message arrives. They all try; the lease is created
// only if absent, so exactly one wins and the others are refused with
// SessionLocked, which they ignore.
//
// session.nats keeps limit markers in the lease bucket, so an expiry
// reaches the watchers as a purge. A released lease is a delete, whose
// tombstone later expires as a purge too: only a purge that follows a
// put — a lease nobody released — is a host gone.

// adopters bounds the adoptions one host runs at once. A host that died
// may leave a thousand sessions; every live host tries them all, each in
// its own random order, so they spread without asking each other. An
// adoption spends most of its time waiting on round trips (the lease's
// replicated write, the log's reads): with 32 at once, 1,000 sessions on
// a 3-node cluster took 4.3-5.2 s to move after a kill; with 64, 4.0-4.6 s
// on the same 2 cores.
const adopters = 64

// watchLeases starts adopting the sessions whose leases expire.
func (h *Host) watchLeases(ctx stdctx.Context) error {
	w, err := h.leases.WatchAll(ctx)
	if err != nil {
		return errs.Wrap(Unreachable, err, "cluster: cannot watch the lease bucket "+h.leases.Bucket())
	}
	h.adoptWatch, h.adoptDone = w, make(chan struct{})
	h.orphans = orphans{ids: map[string]struct{}{}, more: make(chan struct{}, 1)}
	for range adopters {
		h.adoptWork.Add(1)
		go h.adopter()
	}
	go h.adoptExpired(w)
	return nil
}

// orphans are the sessions whose lease ran out, waiting for an adopter.
type orphans struct {
	mu   sync.Mutex
	ids  map[string]struct{}
	more chan struct{} // signalled when ids gets one
	// tries counts the failed adoptions of a session still unowned; an
	// adoption that succeeds, or another host's lease, forgets it.
	tries map[string]int
}

// failed counts a failed adoption of id and returns how many failed.
func (o *orphans) failed(id string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.tries == nil {
		o.tries = map[string]int{}
	}
	o.tries[id]++
	return o.tries[id]
}

// settled forgets the failures of id.
func (o *orphans) settled(id string) {
	o.mu.Lock()
	delete(o.tries, id)
	o.mu.Unlock()
}

func (o *orphans) add(id string) {
	o.mu.Lock()
	o.ids[id] = struct{}{}
	o.mu.Unlock()
	select {
	case o.more <- struct{}{}:
	default:
	}
}

// remove forgets id, if it still waits.
func (o *orphans) remove(id string) {
	o.mu.Lock()
	delete(o.ids, id)
	delete(o.tries, id)
	o.mu.Unlock()
}

// take removes and returns one of the ids, chosen at random.
func (o *orphans) take() (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := rand.IntN(len(o.ids) + 1)
	for id := range o.ids {
		if n <= 0 || len(o.ids) == 1 {
			delete(o.ids, id)
			if len(o.ids) > 0 {
				// Wake another adopter for the rest.
				select {
				case o.more <- struct{}{}:
				default:
				}
			}
			return id, true
		}
		n--
	}
	return "", false
}

// adopter adopts orphans one at a time until the host leaves.
func (h *Host) adopter() {
	defer h.adoptWork.Done()
	for {
		id, ok := h.orphans.take()
		if !ok {
			select {
			case <-h.ctx.Done():
				return
			case <-h.orphans.more:
				continue
			}
		}
		if h.ctx.Err() != nil {
			return
		}
		h.adopt(id)
	}
}

func (h *Host) adoptExpired(w jetstream.KeyWatcher) {
	defer close(h.adoptDone)
	// held are the leases that exist, from the watch's initial values on.
	held := map[string]bool{}
	// Forwards read owners from the view only while the watch runs.
	defer h.leaseView.setLive(false)
	for {
		var e jetstream.KeyValueEntry
		select {
		case <-h.ctx.Done():
			// Leaving: with the server away the watch's channel may not
			// close for a while.
			return
		case u, ok := <-w.Updates():
			if !ok {
				return
			}
			e = u
		}
		if e == nil {
			h.leaseView.setLive(true) // the initial values are in
			continue
		}
		switch e.Operation() {
		case jetstream.KeyValuePut:
			held[e.Key()] = true
			if rec, ok := h.leaseView.put(e.Key(), e.Value()); ok && rec.HostID != h.o.HostID {
				// Adopted by another host: not worth a claim here, which
				// would look the session up and build its agent to be
				// refused the lease.
				h.orphans.remove(e.Key())
				h.dropStale(e.Key(), nil)
			}
		case jetstream.KeyValueDelete:
			h.leaseView.drop(e.Key())
			delete(held, e.Key())
		case jetstream.KeyValuePurge:
			h.leaseView.drop(e.Key())
			if held[e.Key()] {
				delete(held, e.Key())
				// This host's own lease may be the one that ran out (it
				// stalled): its copy stops before anyone resumes the log.
				h.dropStale(e.Key(), h.orphans.add)
			}
		}
	}
}

// Adoption retries. An adoption that fails for a passing reason (a
// timeout on a host starved of CPU, a copy of its own still closing, a
// hook refusing once) must not leave the session unowned: nothing else
// retries it until a message arrives, and a prompt its dead host queued
// would wait for that. While no host holds the lease, the adoption is
// tried again after a backoff, a bounded number of times.
const (
	adoptRetryFirst = 100 * time.Millisecond
	adoptRetries    = 12
)

// adopt resumes session id here, unless another host got it first.
func (h *Host) adopt(id string) {
	ctx, cancel := stdctx.WithTimeout(h.ctx, h.o.LeaseTTL+h.o.ConnectTimeout)
	defer cancel()
	_, err := h.claim(ctx, id)
	switch {
	case err == nil:
		h.orphans.settled(id)
		h.log.Info("cluster: resumed a session whose host's lease ran out", "session", id)
		return
	case errs.HasCode(err, session.NotFound), h.ctx.Err() != nil:
		// Deleted meanwhile, or this host is leaving.
		h.orphans.settled(id)
		return
	case errs.HasCode(err, session.SessionLocked):
		// Usually another host resumed it: its lease, seen by the watch,
		// ends the retries below.
		h.log.Debug("cluster: a session whose lease ran out is locked; checking again shortly", "session", id, "error", err)
	default:
		h.log.Warn("cluster: cannot resume a session whose host's lease ran out; trying again shortly", "session", id, "error", err)
	}
	n := h.orphans.failed(id)
	if n > adoptRetries {
		h.orphans.settled(id)
		h.log.Error("cluster: gave up resuming a session whose host's lease ran out; the next message for it will try again", "session", id, "attempts", n, "error", err)
		return
	}
	wait := min(adoptRetryFirst<<(n-1), h.o.LeaseTTL)
	h.spawn(func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		if _, held := h.leaseView.get(id); held {
			h.orphans.settled(id) // someone holds it now
			return
		}
		h.orphans.add(id)
	})
}

// stopAdopting ends the watch and waits for an adoption in progress.
func (h *Host) stopAdopting() {
	if h.adoptWatch == nil {
		return
	}
	// Stopping deletes the watch's consumer on the server, which waits
	// out a request timeout while the server is away; the connection's
	// close ends the watch then.
	if h.nc.IsConnected() {
		h.adoptWatch.Stop()
	}
	<-h.adoptDone // the loop ends with h.ctx, cancelled first
	h.adoptWork.Wait()
}
