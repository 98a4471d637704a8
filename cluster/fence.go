package cluster

import (
	stdctx "context"
)

// A host that stalled past lease_ttl (SIGSTOP, a long GC pause, a VM
// frozen) wakes up with sessions open whose leases ran out: another host
// may run them now. Until its copy closes it would keep calling the model
// and running tools for a turn the log records as interrupted. Two things
// tell it, whichever comes first once it runs again: its watch of the
// lease bucket (the expiry of its lease, another host's new one), and the
// sweep that follows each heartbeat, which asks every open session's
// lease whether it still holds. Each drop runs on its own, so a host with
// many stale sessions closes them together.

// dropStale closes, in the background, this host's copy of session id if
// its lease is lost — renewed at once to find out, not trusted for being
// renewed lately — then calls then (when set) with id.
func (h *Host) dropStale(id string, then func(string)) {
	ss, open := h.o.Sessions.Get(id)
	if !open && then == nil {
		// The common case, every renewal of another host's lease: no
		// goroutine for it.
		return
	}
	h.spawn(func() {
		if open {
			ctx, cancel := stdctx.WithTimeout(h.ctx, h.o.ConnectTimeout)
			h.staleBy(ctx, ss, true)
			cancel()
		}
		if then != nil {
			then(id)
		}
	})
}

// sweepStale checks every session open here, after a heartbeat. A lease
// renewed lately is taken at its word (no request to the server); after a
// stall none is, and each is renewed, failing for those that ran out.
func (h *Host) sweepStale() {
	for _, ss := range h.o.Sessions.Sessions() {
		h.spawn(func() {
			ctx, cancel := stdctx.WithTimeout(h.ctx, h.o.ConnectTimeout)
			defer cancel()
			h.staleBy(ctx, ss, false)
		})
	}
}

// spawn runs fn on its own goroutine, which Close waits for; once the
// host is leaving it does not start.
func (h *Host) spawn(fn func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx.Err() != nil {
		return
	}
	h.drops.Add(1)
	go func() {
		defer h.drops.Done()
		fn()
	}()
}
