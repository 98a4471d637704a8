package cluster

import (
	"encoding/json"
	"time"

	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
)

// SetWaitSlice shortens the slice of a forwarded wait for a test; the
// function it returns restores it.
func SetWaitSlice(d time.Duration) func() {
	old := waitSlice
	waitSlice = d
	return func() { waitSlice = old }
}

// Relays counts the approval relays h serves for clients on other hosts.
func (h *Host) Relays() int {
	h.relays.mu.Lock()
	defer h.relays.mu.Unlock()
	return len(h.relays.m)
}

// SeeLease makes h's view of the lease bucket (leasecache.go) name host
// as the owner of session id, as a watch that lags would.
func (h *Host) SeeLease(id, host string) {
	raw, _ := json.Marshal(natsplugin.LeaseRecord{Holder: "a test", HostID: host})
	h.leaseView.put(id, raw)
}

// SeesLease reports the owner h's view of the lease bucket names for
// session id, if it serves one.
func (h *Host) SeesLease(id string) (string, bool) {
	rec, ok := h.leaseView.get(id)
	return rec.HostID, ok
}
