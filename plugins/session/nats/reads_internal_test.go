package nats

import (
	stdctx "context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
	natsgo "github.com/nats-io/nats.go"
)

// TestALogIsReadWithoutAConsumer: a log is read by direct gets — no
// consumer is created for it, which a clustered server would create and
// delete through its meta leader — in two requests for a log of 300
// events: its first two messages with their headers, then the rest. A stream that refuses direct gets (an earlier version set
// AllowDirect back) is still read, through a consumer.
func TestALogIsReadWithoutAConsumer(t *testing.T) {
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "DIRECTREAD")
	storeSessions(t, st, 0, 1, 300)
	nc, err := natsgo.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var consumers, directs atomic.Int64
	sub, err := nc.Subscribe("$JS.API.>", func(m *natsgo.Msg) {
		switch {
		case strings.HasPrefix(m.Subject, "$JS.API.CONSUMER."):
			consumers.Add(1)
		case strings.HasPrefix(m.Subject, "$JS.API.DIRECT.GET."):
			directs.Add(1)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	ctx := stdctx.Background()
	evs, err := st.Load(ctx, "s0000")
	if err != nil || len(evs) != 300 {
		t.Fatalf("loading a log of 300 events: %d, %v", len(evs), err)
	}
	nc.Flush()
	if c, d := consumers.Load(), directs.Load(); c != 0 || d != 2 {
		t.Errorf("reading a log of 300 events sent %d consumer requests and %d direct gets; want none and two", c, d)
	}
	// The spy would answer the direct get the stream no longer serves.
	sub.Unsubscribe()

	js := natstest.JetStream(t, srv.ClientURL())
	s, err := js.Stream(ctx, "DIRECTREAD")
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.AllowDirect = false
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	evs, err = st.Load(ctx, "s0000")
	if err != nil || len(evs) != 300 || evs[299].Seq != 300 {
		t.Fatalf("loading a log of 300 events from a stream without direct gets: %d, %v", len(evs), err)
	}
}
