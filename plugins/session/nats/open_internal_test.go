package nats

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// TestAnOpenedSessionIsStoredBeforeItsFirstEvent: a session opened and
// never written is in the stream from its open, so another process (a
// host taking over after the opener died) finds it — empty, not missing —
// and lists it; its lease then goes to the next holder as usual.
func TestAnOpenedSessionIsStoredBeforeItsFirstEvent(t *testing.T) {
	srv := natstest.Single(t)
	cfg := Config{}.Defaults()
	cfg.URL, cfg.Stream, cfg.SubjectPrefix = srv.ClientURL(), "OPENREC", "dsh.openrec"
	a, err := connect(hclog.NewNullLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer a.close()
	b, err := connect(hclog.NewNullLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer b.close()
	ctx := stdctx.Background()
	wr, err := a.lock(ctx, "fresh", false)
	if err != nil {
		t.Fatal(err)
	}
	events, err := b.Load(ctx, "fresh")
	if err != nil || len(events) != 0 {
		t.Fatalf("loading a session opened elsewhere and never written: %d events, %v", len(events), err)
	}
	list, err := b.List(ctx)
	if err != nil || len(list) != 1 || list[0].ID != "fresh" || list[0].State != session.StateOpen {
		t.Fatalf("the listing: %+v %v", list, err)
	}
	if err := wr.Release(); err != nil {
		t.Fatal(err)
	}
	// The next holder writes after the open record, and a reader sees its
	// events only.
	next, err := b.lock(ctx, "fresh", false)
	if err != nil {
		t.Fatal(err)
	}
	next.add("agent", "", session.Event{Seq: 1, Type: session.TurnStart, Turn: 1})
	if err := next.write(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if events, err := a.Load(ctx, "fresh"); err != nil || len(events) != 1 || events[0].Type != session.TurnStart {
		t.Fatalf("the log after the open record: %+v %v", events, err)
	}
	if err := next.Release(); err != nil {
		t.Fatal(err)
	}
}
