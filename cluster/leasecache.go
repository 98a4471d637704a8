package cluster

import (
	"bytes"
	"encoding/json"
	"sync"

	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
)

// A forwarded request used to read the session's lease first, a round
// trip to the bucket's leader before the one to the owner. A host that
// claims sessions already watches every lease (adopt.go), so the watch's
// last view of the lease names the owner without a read.
//
// The view may lag: a lease that moved is seen a moment later. That cannot
// send a request to a stale owner silently: the host the view names serves
// the request only if the session is open there and still its own (route's
// stale check); else it reads the lease itself — only the first hop uses
// the view — and forwards to the owner it finds, or says the session moved.
// A named host gone altogether answers nobody; then the entry is dropped
// and the lease read. The host named serves a session open there while its
// lease holds — its own lease trusts a renewal for two thirds of lease_ttl,
// and another host can take the session only once it ran out — and while
// its own view does not say otherwise.

// leaseCache is the lease bucket as the adoption watch last saw it.
type leaseCache struct {
	mu sync.RWMutex
	// live: the watch delivered its initial values and still runs; until
	// then, and once it stops, nothing is served from here.
	live bool
	m    map[string]seenLease
}

// seenLease is a lease as the watch delivered it: its value, to decode
// only what changed (a renewal rewrites the same value), and the record.
type seenLease struct {
	raw []byte
	rec natsplugin.LeaseRecord
}

// put notes the value of a lease put and returns its record; ok is false
// for a value that is not a lease record, which nothing is forwarded by.
func (c *leaseCache) put(key string, raw []byte) (rec natsplugin.LeaseRecord, ok bool) {
	c.mu.RLock()
	old, ok := c.m[key]
	c.mu.RUnlock()
	if ok && bytes.Equal(old.raw, raw) {
		return old.rec, true
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		c.drop(key)
		return natsplugin.LeaseRecord{}, false
	}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]seenLease{}
	}
	c.m[key] = seenLease{raw: bytes.Clone(raw), rec: rec}
	c.mu.Unlock()
	return rec, true
}

func (c *leaseCache) drop(key string) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}

// forget drops key if its record still names host: a request the host did
// not take.
func (c *leaseCache) forget(key, host string) {
	c.mu.Lock()
	if s, ok := c.m[key]; ok && s.rec.HostID == host {
		delete(c.m, key)
	}
	c.mu.Unlock()
}

func (c *leaseCache) setLive(live bool) {
	c.mu.Lock()
	c.live = live
	if !live {
		c.m = nil
	}
	c.mu.Unlock()
}

// get returns the lease of key as last seen, if the watch is live and saw
// one.
func (c *leaseCache) get(key string) (natsplugin.LeaseRecord, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if !c.live {
		return natsplugin.LeaseRecord{}, false
	}
	s, ok := c.m[key]
	return s.rec, ok
}

// disowns reports whether the live view has session key leased to another
// host than host, or not at all.
func (c *leaseCache) disowns(key, host string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	s, ok := c.m[key]
	return c.live && (!ok || s.rec.HostID != host)
}
