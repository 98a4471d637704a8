package cluster_test

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestAnExpiredLeaseIsAdopted: a lease that runs out — its host died with
// the session open — makes one live host resume the session at once; a
// session whose lease was released stays closed, though its tombstone
// expires the same way.
func TestAnExpiredLeaseIsAdopted(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	kv := leases(t, srv, stream)
	persist(t, a, "released")
	persist(t, a, "orphaned")
	// A host took "orphaned" and died: its lease is never renewed.
	dead, _ := json.Marshal(natsplugin.LeaseRecord{Holder: "a dead host", HostID: "dead", Since: time.Now()})
	if _, err := kv.Create(ctxT(t), "orphaned", dead); err != nil {
		t.Fatal(err)
	}
	var adopter *node
	eventually(t, "a host to resume the orphaned session", func() bool {
		for _, n := range []*node{a, b} {
			if _, open := n.h.Sessions().Get("orphaned"); open {
				adopter = n
				return true
			}
		}
		return false
	})
	if got := owner(t, kv, "orphaned"); got != adopter.id {
		t.Fatalf("host %s resumed the session, and its lease names %q", adopter.id, got)
	}
	if got := adopter.prompts(t, "orphaned"); len(got) != 1 || got[0] != "first" {
		t.Fatalf("the adopted session's prompts: %q", got)
	}
	for _, n := range []*node{a, b} {
		if n != adopter {
			if _, open := n.h.Sessions().Get("orphaned"); open {
				t.Fatal("both hosts resumed the orphaned session")
			}
		}
		// The released session's tombstone expired before the orphaned
		// lease did (it was written first).
		if _, open := n.h.Sessions().Get("released"); open {
			t.Fatalf("host %s resumed a session whose lease was released", n.id)
		}
	}
}

// TestAFailedAdoptionIsTriedAgain: the only host that may adopt an
// orphaned session fails its first attempts (its entry point refuses the
// claim, as a host starved of CPU times out). Nothing else would resume
// the session until a message came for it; the host tries again while no
// lease names an owner, and resumes it.
func TestAFailedAdoptionIsTriedAgain(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	var refusals atomic.Int32
	a := startNode(t, srv, stream, "a", nodeOpts{claimed: func(ss *sessions.Session) error {
		if ss.ID() == "orphaned" && refusals.Add(1) <= 2 {
			return errs.New(errs.ServiceUnavailable, "test: not now")
		}
		return nil
	}})
	kv := leases(t, srv, stream)
	persist(t, a, "orphaned")
	dead, _ := json.Marshal(natsplugin.LeaseRecord{Holder: "a dead host", HostID: "dead", Since: time.Now()})
	if _, err := kv.Create(ctxT(t), "orphaned", dead); err != nil {
		t.Fatal(err)
	}
	// A refused adoption has the session open while its entry point is
	// asked, so "open" alone can be seen before the third attempt.
	eventually(t, "the orphaned session resumed after two failed adoptions", func() bool {
		_, open := a.h.Sessions().Get("orphaned")
		return open && refusals.Load() >= 3
	})
	if n := refusals.Load(); n != 3 {
		t.Fatalf("%d adoptions tried, want 3 (two refused, one taken)", n)
	}
	if got := owner(t, kv, "orphaned"); got != "a" {
		t.Fatalf("the adopted session's lease names %q, want a", got)
	}
}
