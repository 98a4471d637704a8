package cluster_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestAPromptQueuedOnALostOwnerRunsOnTheNext: host a accepts a prompt
// behind a long turn, then loses the session (its lease removed, as when
// it dies or stalls past lease_ttl) to host b. The queued prompt, which
// only a's memory held, runs on b once; a retry of its request id is
// answered from b's log, not delivered again.
func TestAPromptQueuedOnALostOwnerRunsOnTheNext(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{delay: 50 * time.Millisecond})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	kv := leases(t, srv, stream)
	a.open(t, "s1")
	if _, err := a.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{RequestID: "r1", Content: strings.Repeat("long ", 200)}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{RequestID: "r2", Content: "queued"}); err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctxT(t), "s1"); err != nil {
		t.Fatal(err)
	}
	// The delete stands for an expiry; b forwards by its watch's view,
	// which must have seen it (see stale_test.go).
	eventually(t, "b to see the lease gone", func() bool {
		_, ok := b.c.SeesLease("s1")
		return !ok
	})
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{RequestID: "r3", Content: "after"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a to close its copy of s1", func() bool {
		_, open := a.h.Sessions().Get("s1")
		return !open
	})
	got := b.prompts(t, "s1")
	if !slices.Equal(got[1:], []string{"queued", "after"}) {
		t.Fatalf("b's session holds the prompts %q", got)
	}
	first := b.events(t, "s1")
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{RequestID: "r2", Content: "queued"}); err != nil {
		t.Fatal(err)
	}
	if n := len(b.events(t, "s1")); n != len(first) {
		t.Fatalf("a retry of the queued prompt's request id added %d events", n-len(first))
	}
}
