package cluster_test

import (
	"encoding/json"
	"errors"
	"os"
	"testing"

	"github.com/dsh-go/dsh/cluster"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestPresenceIsRenewedAndRemoved: a joined host's record outlives the
// bucket's TTL because the heartbeat renews it, and Close deletes it.
func TestPresenceIsRenewedAndRemoved(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := startNode(t, srv, stream, "a", nodeOpts{group: "workers"})
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctxT(t), cluster.HostBucket(stream))
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctxT(t), "a")
	if err != nil {
		t.Fatal(err)
	}
	var r cluster.HostRecord
	if err := json.Unmarshal(e.Value(), &r); err != nil || r.HostID != "a" || r.Group != "workers" || r.PID != os.Getpid() || r.Started.IsZero() {
		t.Fatalf("the presence record is %+v (%v)", r, err)
	}
	// Four renewals, a third of the TTL apart, span more than the TTL:
	// without them the entry would have expired.
	renewals, last := 0, e.Revision()
	eventually(t, "four renewals of the presence record", func() bool {
		e, err := kv.Get(ctxT(t), "a")
		if err != nil {
			t.Fatalf("the presence record went away: %v", err)
		}
		if e.Revision() != last {
			renewals, last = renewals+1, e.Revision()
		}
		return renewals >= 4
	})
	if err := a.c.Close(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	a.c = nil
	if _, err := kv.Get(ctxT(t), "a"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("after Close the presence record is still there: %v", err)
	}
}
