package cluster_test

import (
	"slices"
	"testing"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestAForwardGoesByTheLeaseWatch: a host forwards by its watch's view of
// the lease bucket, which names the owner once the session opens and
// forgets it once it closes.
func TestAForwardGoesByTheLeaseWatch(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	ss := a.open(t, "s1")
	eventually(t, "host b's view names host a as the owner of s1", func() bool {
		h, ok := b.c.SeesLease("s1")
		return ok && h == "a"
	})
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "by the view"}); err != nil {
		t.Fatal(err)
	}
	if got := a.prompts(t, "s1"); !slices.Equal(got, []string{"by the view"}) {
		t.Fatalf("host a's session holds the prompts %q", got)
	}
	if err := ss.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "host b's view forgets the released lease", func() bool {
		_, ok := b.c.SeesLease("s1")
		return !ok
	})
}

// TestAStaleLeaseViewStillReachesTheOwner: host c's view of the lease
// bucket lags — it names host a, or a host long gone, for a session host b
// owns now. The prompt still lands in b's session and nowhere else: host a
// does not serve a session it does not hold but reads the lease and passes
// the prompt on; a host gone answers nobody, and c reads the lease.
func TestAStaleLeaseViewStillReachesTheOwner(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	c := startNode(t, srv, stream, "c", nodeOpts{})
	b.open(t, "s1")
	eventually(t, "host c's view names host b", func() bool {
		h, ok := c.c.SeesLease("s1")
		return ok && h == "b"
	})

	c.c.SeeLease("s1", "a")
	if _, err := c.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "via a"}); err != nil {
		t.Fatalf("a prompt forwarded by a view naming host a: %v", err)
	}
	c.c.SeeLease("s1", "gone")
	if _, err := c.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "past a host gone"}); err != nil {
		t.Fatalf("a prompt forwarded by a view naming a host gone: %v", err)
	}
	if h, ok := c.c.SeesLease("s1"); ok && h == "gone" {
		t.Fatal("host c still names a host that answered nobody")
	}
	if got := b.prompts(t, "s1"); !slices.Equal(got, []string{"via a", "past a host gone"}) {
		t.Fatalf("host b's session holds the prompts %q", got)
	}
	for _, n := range []*node{a, c} {
		if _, open := n.h.Sessions().Get("s1"); open {
			t.Fatalf("host %s opened the session host b owns", n.id)
		}
	}
}

// TestAStaleLeaseViewOfAnOwnerGoneFailsAsUnreachable: the view names host
// a, which no longer owns the session; the lease names host b, which left
// the cluster. The prompt fails as it does with no view: the owner is
// unreachable, nobody answers — not served by a, not lost.
func TestAStaleLeaseViewOfAnOwnerGoneFailsAsUnreachable(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	c := startNode(t, srv, stream, "c", nodeOpts{})
	b.open(t, "s1")
	if err := b.c.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	b.c = nil
	c.c.SeeLease("s1", "a")
	_, err := c.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "anyone?"})
	if !errs.Has(err, cluster.OwnerUnreachable, cluster.ReasonNoResponders) {
		t.Fatalf("prompting by a stale view a session whose owner left: %v", err)
	}
	if _, open := a.h.Sessions().Get("s1"); open {
		t.Fatal("host a opened the session host b owns")
	}
}

// TestAStaleLeaseViewOfASessionNobodyOwnsClaimsItAtTheSender: the view
// names host a for a session a closed, which nobody owns now. The prompt
// resumes the session on the host it was sent to, as without the view —
// not on a, which the view sent it to.
func TestAStaleLeaseViewOfASessionNobodyOwnsClaimsItAtTheSender(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{})
	b := startNode(t, srv, stream, "b", nodeOpts{})
	persist(t, a, "s1")
	b.c.SeeLease("s1", "a")
	if _, err := b.c.Prompt(ctxT(t), "s1", agentcontroller.Followup, sessions.PromptRequest{Content: "second"}); err != nil {
		t.Fatal(err)
	}
	if got := b.prompts(t, "s1"); !slices.Equal(got, []string{"first", "second"}) {
		t.Fatalf("host b's session holds the prompts %q", got)
	}
	if _, open := a.h.Sessions().Get("s1"); open {
		t.Fatal("host a claimed the session the prompt was sent to b for")
	}
}
