package cluster_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/internal/natstest"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStatusRidesOutALostNode: the server leading the cluster's
// JetStream goes down; a status asked at once waits for the new leader and reports,
// where it used to fail.
func TestStatusRidesOutALostNode(t *testing.T) {
	c := natstest.Start(t, 3)
	js := natstest.JetStream(t, c.URLs())
	stream := streamName()
	for _, bucket := range []string{cluster.HostBucket(stream), natsplugin.LeaseBucket(stream)} {
		if _, err := js.CreateKeyValue(ctxT(t), jetstream.KeyValueConfig{Bucket: bucket, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
	}
	hosts, err := js.KeyValue(ctxT(t), cluster.HostBucket(stream))
	if err != nil {
		t.Fatal(err)
	}
	rec, _ := json.Marshal(cluster.HostRecord{HostID: "a", Started: time.Now()})
	if _, err := hosts.Put(ctxT(t), "a", rec); err != nil {
		t.Fatal(err)
	}
	// The JetStream meta leader: listing a bucket's keys makes a consumer,
	// which needs one.
	for i := range c.Len() {
		if c.Node(i).JetStreamIsLeader() {
			c.StopNode(i)
			break
		}
	}
	rep, err := cluster.Status(ctxT(t), cluster.Options{URL: c.URLs(), Stream: stream, ConnectTimeout: time.Second})
	if err != nil {
		t.Fatalf("status with the presence bucket's leader down: %v", err)
	}
	if len(rep.Hosts) != 1 || rep.Hosts[0].HostID != "a" {
		t.Fatalf("status reported %+v", rep)
	}
}
