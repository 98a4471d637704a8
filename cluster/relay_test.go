package cluster_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/nats-io/nats.go"
)

// TestARemoteApproverLearnsTheOwnerFellSilent: a host that took a relay
// and then says nothing (it died, or stalls) ends the stream of the
// client on the other host after the request timeout, so the client
// attaches again instead of waiting for questions that cannot come.
func TestARemoteApproverLearnsTheOwnerFellSilent(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	b := serviceNode(t, srv, stream, "b", nodeOpts{})
	// The ghost holds the lease of s1 and answers the relay's start, then
	// goes quiet.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	sub, err := nc.Subscribe(cluster.RouteSubject(stream, "ghost"), func(m *nats.Msg) {
		m.Respond([]byte(`{"result":"\"ghost-relay\""}`))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(natsplugin.LeaseRecord{Holder: "a ghost", HostID: "ghost", Since: time.Now()})
	if _, err := leases(t, srv, stream).Create(ctxT(t), "s1", rec); err != nil {
		t.Fatal(err)
	}
	st, err := b.svc.Attach(ctxT(t), "s1", sessions.AttachOptions{Approvals: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	_, err = st.Next(ctxT(t))
	if !errs.Has(err, cluster.OwnerUnreachable, cluster.ReasonTimeout) {
		t.Fatalf("the stream of a session whose owner fell silent: %v", err)
	}
	if waited := time.Since(start); waited < time.Second || waited > patience/2 {
		t.Fatalf("the silent owner was given up on after %s; the request timeout is 1s", waited)
	}
}
