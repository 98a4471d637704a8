package cluster_test

import (
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestEnsuringAnExistingSessionNeverStoredIsNotFound: through the cluster
// Service, on the host that would claim it and on one that forwards,
// Ensure in mode "existing" of an id nothing is stored under is
// SESSION_NOT_FOUND, and leaves no session behind anywhere: none open,
// none stored, no lease.
func TestEnsuringAnExistingSessionNeverStoredIsNotFound(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := serviceNode(t, srv, stream, "a", nodeOpts{})
	b := serviceNode(t, srv, stream, "b", nodeOpts{noOpen: true})
	o := sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: "never"}, Mode: sessions.EnsureExisting}
	for _, n := range []*svcNode{a, b} {
		in, err := n.svc.Ensure(ctxT(t), o)
		if !errs.HasCode(err, session.NotFound) {
			t.Fatalf("ensure existing through host %s: %+v, %v; want SESSION_NOT_FOUND", n.id, in, err)
		}
	}
	for _, n := range []*svcNode{a, b} {
		if _, open := n.h.Sessions().Get("never"); open {
			t.Fatalf("host %s opened the session", n.id)
		}
	}
	if _, found, err := a.svc.Find(ctxT(t), "never"); err != nil || found {
		t.Fatalf("the refused ensure stored the session: found %v, %v", found, err)
	}
	if got := owner(t, leases(t, srv, stream), "never"); got != "" {
		t.Fatalf("the refused ensure left a lease naming %q", got)
	}
	// Created when the mode allows it, and saying so.
	o.Mode = sessions.EnsureAny
	if in, err := b.svc.Ensure(ctxT(t), o); err != nil || in.How != sessions.HowCreated {
		t.Fatalf("ensure through host b: %+v, %v; want created (on host a)", in, err)
	}
	a.session(t, "never")
}
