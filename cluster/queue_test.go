package cluster_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/nats-io/nats.go/jetstream"
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

// TestQueuedPromptsLeaveTheBucketOnceDurable: prompts queued behind a
// running turn are stored in the queue bucket; once their outcomes are
// durable in the log, the next prompt removes them, and so does the one
// after a retry answered from the log — the bucket keeps only what a new
// owner might still have to run.
func TestQueuedPromptsLeaveTheBucketOnceDurable(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{delay: 200 * time.Millisecond})
	a.open(t, "s1")
	queue, err := natstest.JetStream(t, srv.ClientURL()).KeyValue(ctxT(t), cluster.QueueBucket(stream))
	if err != nil {
		t.Fatal(err)
	}
	entries := func() int {
		t.Helper()
		keys, err := queue.Keys(ctxT(t))
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return 0
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(keys)
	}
	prompt := func(rid string) {
		t.Helper()
		if _, err := a.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{RequestID: rid, Content: "prompt " + rid}); err != nil {
			t.Fatal(err)
		}
	}
	for _, rid := range []string{"r1", "r2", "r3", "r4"} {
		prompt(rid)
	}
	if n := entries(); n == 0 {
		t.Fatal("no entry in the queue bucket with three prompts queued behind a turn")
	}
	if err := a.h.Sessions().Idle(ctxT(t), "s1"); err != nil {
		t.Fatal(err)
	}
	prompt("r5")
	eventually(t, "the queue bucket to hold only the last prompt's entry", func() bool { return entries() == 1 })
	if err := a.h.Sessions().Idle(ctxT(t), "s1"); err != nil {
		t.Fatal(err)
	}
	// Retries are answered from the log, and stored all the same. The
	// second finds the log's durable end where the first did; the first's
	// entry goes then all the same.
	prompt("r1")
	eventually(t, "the queue bucket to hold only the retry's entry", func() bool { return entries() == 1 })
	prompt("r2")
	eventually(t, "the queue bucket to hold only the second retry's entry", func() bool { return entries() == 1 })
}
