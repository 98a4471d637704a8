package natstest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"
)

// Every server is shut down and waited for by the package, so none of
// their goroutines is ignored here.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSingleServesJetStream(t *testing.T) {
	s := natstest.Single(t)
	js := natstest.JetStream(t, s.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.a", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// TestAClusterKeepsAReplicatedStreamThroughAStoppedNode: an R3 stream
// created on a fresh cluster takes writes through any node; with its
// leader stopped it still does, and the restarted node catches up.
func TestAClusterKeepsAReplicatedStreamThroughAStoppedNode(t *testing.T) {
	c := natstest.Start(t, 3)
	if got := strings.Count(c.URLs(), ",") + 1; got != 3 {
		t.Fatalf("URLs() lists %d URLs: %s", got, c.URLs())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	js := natstest.JetStream(t, c.URLs())
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	leader := c.StreamLeader("S")
	if moved := c.MoveStreamLeader("S", leader); moved == leader {
		t.Fatalf("the leadership of node %d did not move", leader)
	}
	if again := c.MoveStreamLeader("S", leader); again == leader {
		t.Fatal("moving the leadership off a node that does not lead moved it onto it")
	}
	leader = c.StreamLeader("S")
	for i := 0; i < c.Len(); i++ {
		if _, err := natstest.JetStream(t, c.URL(i)).Publish(ctx, "s.a", []byte("x")); err != nil {
			t.Fatalf("publishing through node %d: %v", i, err)
		}
	}
	c.StopNode(leader)
	if c.Node(leader) != nil {
		t.Fatal("a stopped node still has a server")
	}
	other := (leader + 1) % c.Len()
	// Until the two left elect a leader the stream answers nobody: a
	// publish waits for the election (as a client's retries would), but
	// not past ctx.
	if _, err := natstest.JetStream(t, c.URL(other)).Publish(ctx, "s.a", []byte("y"),
		jetstream.WithRetryAttempts(60), jetstream.WithRetryWait(250*time.Millisecond)); err != nil {
		t.Fatalf("publishing through node %d with the leader %d stopped: %v", other, leader, err)
	}
	if now := c.StreamLeader("S"); now == leader {
		t.Fatalf("stopped node %d still leads the stream", leader)
	}
	c.RestartNode(leader)
	c.WaitStreamCurrent(leader, "S")
	info, err := natstest.JetStream(t, c.URL(leader)).Stream(ctx, "S")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := info.Info(ctx); err != nil || st.State.Msgs != 4 {
		t.Fatalf("after the restart the stream holds %+v (%v); want 4 messages", st, err)
	}
}

// TestAFrozenProxyStallsAClientWithoutDisconnecting: through a frozen
// proxy a request times out while the connection stays up; thawed, the
// same connection works again.
func TestAFrozenProxyStallsAClientWithoutDisconnecting(t *testing.T) {
	s := natstest.Single(t)
	p := natstest.NewProxy(t, s.ClientURL())
	nc, err := natsgo.Connect(p.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	server, err := natsgo.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	sub, err := server.Subscribe("echo", func(m *natsgo.Msg) { m.Respond(m.Data) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	server.Flush()
	if _, err := nc.Request("echo", []byte("1"), 5*time.Second); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	p.Freeze()
	if _, err := nc.Request("echo", []byte("2"), 200*time.Millisecond); !errors.Is(err, natsgo.ErrTimeout) {
		t.Fatalf("through the frozen proxy: %v", err)
	}
	if !nc.IsConnected() {
		t.Fatal("a frozen proxy disconnected its client")
	}
	p.Thaw()
	if m, err := nc.Request("echo", []byte("3"), 5*time.Second); err != nil || string(m.Data) != "3" {
		t.Fatalf("through the thawed proxy: %v", err)
	}
}

// TestProcsFormAJetStreamCluster: nats-server processes built from the
// module cache form a cluster that keeps an R3 stream.
func TestProcsFormAJetStreamCluster(t *testing.T) {
	p := natstest.StartProcs(t, 3)
	js := natstest.JetStream(t, p.URLs())
	ctx, cancel := context.WithTimeout(context.Background(), natstest.ReadyTimeout)
	defer cancel()
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js.CreateOrUpdateStream(actx, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3})
		acancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("%v\n%s", err, p.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := js.Publish(ctx, "r3.x", []byte("kept")); err != nil {
		t.Fatal(err)
	}
}
