package nats

import (
	stdctx "context"
	"encoding/json"
	"strconv"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestAPublishWhoseAckWasLostIsNotAnotherWriter: the first try of a
// publish was stored but its ack never came back (a slow server, a
// timeout). The retry is refused for its expected sequence; the writer
// finds its own message at the end of the subject and carries on, where
// it used to fence itself and stop writing the session for good.
func TestAPublishWhoseAckWasLostIsNotAnotherWriter(t *testing.T) {
	srv := natstest.Single(t)
	cfg := Config{}.Defaults()
	cfg.URL, cfg.Stream, cfg.SubjectPrefix = srv.ClientURL(), "ACKLOST", "dsh.acklost"
	st, err := connect(hclog.NewNullLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	ctx := stdctx.Background()
	wr, err := st.lock(ctx, "s1", false)
	if err != nil {
		t.Fatal(err)
	}
	first := session.Event{Seq: 1, Type: session.TurnStart, Turn: 1}
	wr.add("agent", "", first)
	// The lost try: the same message, id and expected sequence as the
	// writer's (after the session's open record), stored behind its back.
	data, _ := json.Marshal(first)
	m := natsgo.NewMsg(wr.subject)
	m.Data = data
	m.Header.Set(agentHeader, "agent")
	if _, err := st.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(wr.last), jetstream.WithMsgID(wr.lease.token+":"+strconv.Itoa(1))); err != nil {
		t.Fatal(err)
	}
	if err := wr.write(ctx, 1); err != nil {
		t.Fatalf("the retry of a stored message: %v", err)
	}
	wr.add("agent", "", session.Event{Seq: 2, Type: session.TurnEnd, Turn: 1})
	if err := wr.write(ctx, 2); err != nil {
		t.Fatalf("the next write: %v", err)
	}
	events, err := st.Load(ctx, "s1")
	if err != nil || len(events) != 2 {
		t.Fatalf("the log holds %d events (%v), want 2 — each once", len(events), err)
	}
	if err := wr.Release(); err != nil {
		t.Fatal(err)
	}
}
