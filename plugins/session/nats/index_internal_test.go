package nats

import (
	stdctx "context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go/jetstream"
)

// storeSessions writes n sessions of one turn of events events each
// (events >= 3) through st, and releases them.
func storeSessions(t testing.TB, st *store, from, n, events int) {
	t.Helper()
	ctx := stdctx.Background()
	for i := from; i < from+n; i++ {
		id := fmt.Sprintf("s%04d", i)
		wr, err := st.lock(ctx, id, false)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		wr.add("main", "", session.Event{Seq: 1, Type: session.TurnStart, Turn: 1, Time: now})
		wr.add("main", "", session.Event{Seq: 2, Type: session.UserMessage, Turn: 1, Time: now,
			Message: &llm.Message{Role: llm.RoleUser, Content: "hello " + id}})
		for seq := 3; seq < events; seq++ {
			wr.add("main", "", session.Event{Seq: int64(seq), Type: session.StepStart, Turn: 1, Time: now})
		}
		wr.add("main", "", session.Event{Seq: int64(events), Type: session.TurnEnd, Turn: 1, Time: now})
		if err := wr.write(ctx, int64(events)); err != nil {
			t.Fatal(err)
		}
		if err := wr.Release(); err != nil {
			t.Fatal(err)
		}
	}
}

func testStore(t testing.TB, url, stream string) *store {
	t.Helper()
	cfg := Config{}.Defaults()
	cfg.URL, cfg.Stream, cfg.SubjectPrefix = url, stream, "dsh."+stream
	st, err := connect(hclog.NewNullLogger(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	return st
}

// requests counts the messages st's connection sent while fn ran.
func requests(st *store, fn func()) uint64 {
	before := st.nc.Stats().OutMsgs
	fn()
	return st.nc.Stats().OutMsgs - before
}

// TestListingCostsTheSameWhateverIsStored: a listing reads the index, not
// the logs — as many requests for 40 stored sessions of 30 events as for
// 4. It used to read every log whole, one request per event.
func TestListingCostsTheSameWhateverIsStored(t *testing.T) {
	srv := natstest.Single(t)
	w := testStore(t, srv.ClientURL(), "LISTCOST")
	storeSessions(t, w, 0, 4, 30)
	r := testStore(t, srv.ClientURL(), "LISTCOST")
	ctx := stdctx.Background()
	var list []session.Summary
	var err error
	few := requests(r, func() { list, err = r.List(ctx) })
	if err != nil || len(list) != 4 {
		t.Fatalf("listing 4 sessions: %d, %v", len(list), err)
	}
	storeSessions(t, w, 4, 36, 30)
	many := requests(r, func() { list, err = r.List(ctx) })
	if err != nil || len(list) != 40 {
		t.Fatalf("listing 40 sessions: %d, %v", len(list), err)
	}
	if many != few || many > 10 {
		t.Errorf("listing 4 sessions sent %d messages, 40 sessions %d; want the same few", few, many)
	}
	for _, s := range list {
		if s.State != session.StateIdle || s.Agent != "main" || s.Title != "hello "+s.ID || s.Turns != 1 || s.LastSeq != 30 || s.Size == 0 || s.Created.IsZero() {
			t.Fatalf("listed %+v", s)
		}
	}
}

// TestFindReadsOneSession: a session is described by its key in a fixed
// number of requests, with its lease and its last seq while another
// process holds it open.
func TestFindReadsOneSession(t *testing.T) {
	srv := natstest.Single(t)
	w := testStore(t, srv.ClientURL(), "FIND")
	storeSessions(t, w, 0, 20, 20)
	ctx := stdctx.Background()
	wr, err := w.lock(ctx, "s0003", false)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Release()
	wr.add("main", "", session.Event{Seq: 21, Type: session.TurnStart, Turn: 2, Time: time.Now()})
	if err := wr.write(ctx, 21); err != nil {
		t.Fatal(err)
	}
	r := testStore(t, srv.ClientURL(), "FIND")
	var sum session.Summary
	var found bool
	n := requests(r, func() {
		// The owner's entry is written off its checkpoint's path.
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if sum, found, err = r.Find(ctx, "s0003"); err != nil || sum.LastSeq == 21 {
				return
			}
		}
	})
	if err != nil || !found || sum.State != session.StateOpen || sum.LastSeq != 21 || sum.Turns != 2 || sum.Holder == "" {
		t.Fatalf("found %v %+v, %v", found, sum, err)
	}
	if one := requests(r, func() { r.Find(ctx, "s0003") }); one > 3 {
		t.Errorf("finding one session of 20 sent %d messages; want 3", one)
	}
	if _, found, err := r.Find(ctx, "nope"); found || err != nil {
		t.Errorf("finding a session never stored: %v, %v", found, err)
	}
	_ = n
}

// TestAStoreWithoutAnIndexIsIndexedOnOpen: sessions stored before the
// index existed are indexed by the first host that opens the store, and
// an entry that lags its log (its writer died before the put) is
// corrected by the next listing.
func TestAStoreWithoutAnIndexIsIndexedOnOpen(t *testing.T) {
	srv := natstest.Single(t)
	w := testStore(t, srv.ClientURL(), "OLDSTORE")
	storeSessions(t, w, 0, 5, 10)
	ctx := stdctx.Background()
	if err := w.js.DeleteKeyValue(ctx, IndexBucket("OLDSTORE")); err != nil {
		t.Fatal(err)
	}
	r := testStore(t, srv.ClientURL(), "OLDSTORE")
	entries, err := r.indexed(ctx)
	if err != nil || len(entries) != 5 || entries["s0002"].Events != 10 || entries["s0002"].Title != "hello s0002" {
		t.Fatalf("index after open: %+v, %v", entries, err)
	}
	// A lagging entry: the log has one more message than it counts.
	x := entries["s0001"]
	x.Msgs--
	r.putEntry(ctx, "s0001", x)
	list, err := r.List(ctx)
	if err != nil || len(list) != 5 {
		t.Fatal(list, err)
	}
	if entries, _ = r.indexed(ctx); entries["s0001"].Msgs != x.Msgs+1 {
		t.Errorf("a lagging entry was not corrected by the listing: %+v", entries["s0001"])
	}
}

// TestHostsStartedTogetherAllSetUp: three hosts that start at once on a
// fresh three-node cluster, before it elected its JetStream leader, all
// create or bind the same replicated stream and buckets. They used to fail
// with "context deadline exceeded" or "insufficient resources".
func TestHostsStartedTogetherAllSetUp(t *testing.T) {
	c := natstest.Boot(t, 3)
	cfg := Config{}.Defaults()
	cfg.URL, cfg.Stream, cfg.SubjectPrefix, cfg.Replicas = c.URLs(), "TOGETHER", "dsh.together", 3
	cfg.ConnectTimeout = time.Second
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := connect(hclog.NewNullLogger(), cfg)
			if err == nil {
				st.close()
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("host %d: %v", i, err)
		}
	}
}

// TestABurstOfStepsIsIndexedOncePerInterval: a session stepped back to
// back puts its index entry at most once every indexEvery (and once at
// the end of the burst), not once per step; the entry names the log's
// end when the burst's last put is in, and after a release, which does
// not wait out indexEvery.
func TestABurstOfStepsIsIndexedOncePerInterval(t *testing.T) {
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "BURST")
	ctx := stdctx.Background()
	wr, err := st.lock(ctx, "burst", false)
	if err != nil {
		t.Fatal(err)
	}
	wr.index.done.Wait() // the new session's first entry
	indexEnd := func() uint64 {
		t.Helper()
		s, err := st.index.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s.(interface{ StreamInfo() *jetstream.StreamInfo }).StreamInfo().State.LastSeq
	}
	before := indexEnd()
	const steps = 20
	start := time.Now()
	for n := 1; n <= steps; n++ {
		appendTurn(t, wr, "main", n)
	}
	took := time.Since(start)
	wr.index.done.Wait()
	puts := indexEnd() - before
	if most := 2 + uint64(took/indexEvery); puts > most || puts == 0 {
		t.Errorf("%d steps in %s put the entry %d times; want 1 to %d", steps, took, puts, most)
	}
	end, _ := st.lastSeq(ctx, wr.subject)
	if x, ok, err := st.entry(ctx, "burst"); err != nil || !ok || x.Last != end || x.Turns != steps {
		t.Errorf("entry after the burst %+v (%v, %v); want the log's end %d, turn %d", x, ok, err, end, steps)
	}
	// A put due a minute from now goes at once when the session is let go.
	defer func(d time.Duration) { indexEvery = d }(indexEvery)
	indexEvery = time.Minute
	appendTurn(t, wr, "main", steps+1)
	released := time.Now()
	if err := wr.Release(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(released); took > 20*time.Second {
		t.Errorf("the release took %s: it waited for the put due indexEvery (%s) after the last", took, indexEvery)
	}
	end, _ = st.lastSeq(ctx, wr.subject)
	if x, ok, err := st.entry(ctx, "burst"); err != nil || !ok || x.Last != end || x.Turns != steps+1 {
		t.Errorf("entry after the release %+v (%v, %v); want the log's end %d, turn %d", x, ok, err, end, steps+1)
	}
}
