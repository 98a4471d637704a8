package nats

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats.go/jetstream"
)

// writeTurn appends turn n of session id for agent through st, the
// prompt named after the session, and releases the session.
func writeTurn(t *testing.T, st *store, id, agent string, n int) {
	t.Helper()
	ctx := stdctx.Background()
	wr, err := st.lock(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	appendTurn(t, wr, agent, n)
	if err := wr.Release(); err != nil {
		t.Fatal(err)
	}
}

// appendTurn writes turn n through wr, whose log holds n-1 turns.
func appendTurn(t *testing.T, wr *writer, agent string, n int) {
	t.Helper()
	now := time.Now().UTC()
	seq := int64(3 * (n - 1))
	wr.add(agent, "", session.Event{Seq: seq + 1, Type: session.TurnStart, Turn: n, Time: now})
	wr.add(agent, "", session.Event{Seq: seq + 2, Type: session.UserMessage, Turn: n, Time: now,
		Message: &llm.Message{Role: llm.RoleUser, Content: "hello " + wr.id}})
	wr.add(agent, "", session.Event{Seq: seq + 3, Type: session.TurnEnd, Turn: n, Time: now})
	if err := wr.write(stdctx.Background(), seq+3); err != nil {
		t.Fatal(err)
	}
}

// pages lists every page of opts' agent, limit at a time, as ids.
func pages(t *testing.T, st *store, opts session.ListOptions) [][]string {
	return firstPages(t, st, opts, 1000)
}

// firstPages lists the first n pages at most.
func firstPages(t *testing.T, st *store, opts session.ListOptions, n int) [][]string {
	t.Helper()
	var out [][]string
	for {
		p, err := st.ListPage(stdctx.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ids(p.Sessions))
		if p.Next == "" || len(out) == n {
			return out
		}
		opts.Cursor = p.Next
	}
}

// expected is what Paginate cuts from List: the pages ListPage must give.
func expected(t *testing.T, st *store, opts session.ListOptions) [][]string {
	return expectedFirst(t, st, opts, 1000)
}

func expectedFirst(t *testing.T, st *store, opts session.ListOptions, n int) [][]string {
	t.Helper()
	list, err := st.List(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for {
		p, err := session.Paginate(append([]session.Summary(nil), list...), opts)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ids(p.Sessions))
		if p.Next == "" || len(out) == n {
			return out
		}
		opts.Cursor = p.Next
	}
}

func ids(list []session.Summary) []string {
	out := []string{}
	for _, s := range list {
		out = append(out, s.ID)
	}
	return out
}

// markerCount is how many open markers the catalog holds.
func markerCount(t *testing.T, st *store) int {
	t.Helper()
	m, err := st.markers(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestPagesFromTheCatalogAreTheListingsPages: sessions written by their
// writers, by two agents (one through the controller's "<agent>@<id>"),
// some written again later, page by agent in the order, and with the
// cursors, of the whole listing cut into pages — and no writer leaves
// its open marker behind.
func TestPagesFromTheCatalogAreTheListingsPages(t *testing.T) {
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "PAGES")
	for i := range 12 {
		agent := "main"
		switch i % 3 {
		case 1:
			agent = "review"
		case 2:
			agent = "main@s" + fmt.Sprint(i)
		}
		writeTurn(t, st, fmt.Sprintf("p%02d", i), agent, 1)
	}
	writeTurn(t, st, "p03", "main", 2)
	writeTurn(t, st, "p07", "review", 2)
	for _, opts := range []session.ListOptions{
		{Agent: "main", Limit: 3}, {Agent: "review", Limit: 2}, {Limit: 5}, {Agent: "main"}, {Agent: "nobody", Limit: 2},
	} {
		got, want := pages(t, st, opts), expected(t, st, opts)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: pages %v, the listing's %v", opts, got, want)
		}
	}
	p, err := st.ListPage(stdctx.Background(), session.ListOptions{Agent: "main", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Sessions[0]; s.ID != "p03" || s.Turns != 2 || s.LastSeq != 6 || s.State != session.StateIdle || s.Title != "hello p03" {
		t.Errorf("first page %+v, want p03 at turn 2, event 6, idle", s)
	}
	if n := markerCount(t, st); n != 0 {
		t.Errorf("%d open markers left by writers that released their sessions", n)
	}
}

// TestPageReadsTheLogOfAWriterThatDiedBetweenLogAndCatalog: a writer
// stores a turn and dies before its index and catalog entries follow (its
// lease runs out). The session's catalog entry is an old one, deep in the
// catalog; another host's first page shows the session first, as its log
// says, and repairs the catalog so the next listing needs no log.
func TestPageReadsTheLogOfAWriterThatDiedBetweenLogAndCatalog(t *testing.T) {
	srv := natstest.Single(t)
	a := testStore(t, srv.ClientURL(), "CRASH")
	writeTurn(t, a, "victim", "main", 1)
	for i := range 20 {
		writeTurn(t, a, fmt.Sprintf("later%02d", i), "main", 1)
	}
	ctx := stdctx.Background()
	wr, err := a.lock(ctx, "victim", false)
	if err != nil {
		t.Fatal(err)
	}
	// The dying writer's turn 2 goes to the log as its write would, and
	// nothing after: no index entry, no catalog entry, no release.
	appended, _ := a.lastSeq(ctx, wr.subject)
	for i, e := range []session.Event{
		{Seq: 4, Type: session.TurnStart, Turn: 2, Time: time.Now().UTC()},
		{Seq: 5, Type: session.UserMessage, Turn: 2, Time: time.Now().UTC(), Message: &llm.Message{Role: llm.RoleUser, Content: "again"}},
	} {
		if _, err := a.js.PublishMsg(ctx, wr.message(outgoing{event: e, data: mustJSON(t, e)}, author{agent: "main"}),
			jetstream.WithExpectLastSequencePerSubject(appended)); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		appended, _ = a.lastSeq(ctx, wr.subject)
	}
	a.writers.Forget("victim", wr)
	if err := wr.lease.release(); err != nil { // as if it ran out
		t.Fatal(err)
	}

	b := testStore(t, srv.ClientURL(), "CRASH")
	p, err := b.ListPage(ctx, session.ListOptions{Agent: "main", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sessions) != 3 {
		t.Fatalf("a page of %d", len(p.Sessions))
	}
	s := p.Sessions[0]
	if s.ID != "victim" || s.Turns != 2 || s.LastSeq != 5 || s.State != session.StateInterrupted {
		t.Fatalf("first %+v, want victim at turn 2, event 5, interrupted, as its log says", s)
	}
	if got, want := pages(t, b, session.ListOptions{Agent: "main", Limit: 4}), expected(t, b, session.ListOptions{Agent: "main", Limit: 4}); !reflect.DeepEqual(got, want) {
		t.Errorf("pages %v, the listing's %v", got, want)
	}
	// Repaired: no marker, and the catalog's own entry names the log's end.
	if n := markerCount(t, b); n != 0 {
		t.Errorf("%d open markers left after the listing repaired the dead writer's", n)
	}
	m, err := b.cat.leader.Last(ctx, b.cat.entrySubject("main", "victim"))
	if err != nil {
		t.Fatal(err)
	}
	var ce catalogEntry
	if err := jsonUnmarshal(m.Data, &ce); err != nil || ce.Last != appended || ce.Turns != 2 {
		t.Errorf("the catalog entry after the repair: %+v (%v); want the log's end %d, turn 2", ce.indexEntry, err, appended)
	}
}

// TestPageWhileAWriterHoldsTheSession: a session held by a live writer
// whose catalog entry lags (its index loop has not run yet) is shown as
// its log is, open, and its marker stays while the writer holds it.
func TestPageWhileAWriterHoldsTheSession(t *testing.T) {
	srv := natstest.Single(t)
	a := testStore(t, srv.ClientURL(), "HELD")
	writeTurn(t, a, "busy", "main", 1)
	writeTurn(t, a, "quiet", "main", 1)
	ctx := stdctx.Background()
	wr, err := a.lock(ctx, "busy", false)
	if err != nil {
		t.Fatal(err)
	}
	appendTurn(t, wr, "main", 2)
	wr.index.done.Wait()
	// The entries lag the log, as between a checkpoint and its index put.
	last, _ := a.lastSeq(ctx, wr.subject)
	e := session.Event{Seq: 7, Type: session.TurnStart, Turn: 3, Time: time.Now().UTC()}
	if _, err := a.js.PublishMsg(ctx, wr.message(outgoing{event: e, data: mustJSON(t, e)}, author{agent: "main"}),
		jetstream.WithExpectLastSequencePerSubject(last)); err != nil {
		t.Fatal(err)
	}
	b := testStore(t, srv.ClientURL(), "HELD")
	p, err := b.ListPage(ctx, session.ListOptions{Agent: "main", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Sessions[0]; s.ID != "busy" || s.Turns != 3 || s.LastSeq != 7 || s.State != session.StateOpen || s.Holder == "" {
		t.Errorf("first %+v, want busy open at turn 3, event 7", s)
	}
	if n := markerCount(t, b); n != 1 {
		t.Errorf("%d open markers while a writer holds its session; want 1", n)
	}
	// The writer's state is behind what was published aside: it is left
	// as a dead one, its lease given up, its marker for listings to repair.
	a.writers.Forget("busy", wr)
	wr.lease.release()
}

// TestPageLeavesOutALogThatIsGone: a delete that died between purging the
// log and the catalog leaves an entry naming no log; pages leave it out
// and remove it.
func TestPageLeavesOutALogThatIsGone(t *testing.T) {
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "GONE")
	writeTurn(t, st, "kept", "main", 1)
	writeTurn(t, st, "purged", "main", 1)
	ctx := stdctx.Background()
	if err := st.stream.Purge(ctx, jetstream.WithPurgeSubject(Subject(st.cfg.SubjectPrefix, "purged"))); err != nil {
		t.Fatal(err)
	}
	p, err := st.ListPage(ctx, session.ListOptions{Agent: "main", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(p.Sessions); !reflect.DeepEqual(got, []string{"kept"}) || p.Next != "" {
		t.Errorf("page %v next %q, want [kept] alone", got, p.Next)
	}
	if _, err := st.cat.leader.Last(ctx, st.cat.entrySubject("main", "purged")); err != jetstream.ErrMsgNotFound {
		t.Errorf("the entry of a log that is gone: %v, want it removed", err)
	}
	// A delete removes both.
	if err := st.Delete(ctx, "kept"); err != nil {
		t.Fatal(err)
	}
	if p, err := st.ListPage(ctx, session.ListOptions{}); err != nil || len(p.Sessions) != 0 {
		t.Errorf("after the delete: %v (%v)", ids(p.Sessions), err)
	}
}

// TestCatalogIsBuiltForAStoreOlderThanIt: a store whose catalog is lost
// (or predates it) gets one built, in order, at the next host's start.
func TestCatalogIsBuiltForAStoreOlderThanIt(t *testing.T) {
	srv := natstest.Single(t)
	a := testStore(t, srv.ClientURL(), "OLD")
	for i := range 8 {
		writeTurn(t, a, fmt.Sprintf("o%d", i), []string{"main", "review"}[i%2], 1)
	}
	writeTurn(t, a, "o2", "main", 2)
	if err := a.js.DeleteStream(stdctx.Background(), CatalogStream("OLD")); err != nil {
		t.Fatal(err)
	}
	b := testStore(t, srv.ClientURL(), "OLD")
	if !b.cat.built.Load() {
		t.Fatal("the catalog is not marked built")
	}
	for _, opts := range []session.ListOptions{{Agent: "main", Limit: 2}, {Limit: 3}} {
		if got, want := pages(t, b, opts), expected(t, b, opts); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: pages %v, the listing's %v", opts, got, want)
		}
	}
}

// TestFirstPageIsCertainFromTheTail: 2,000 sessions of 10 agents, a second
// apart, catalogued as their writers would have. Pages equal the listing's
// at every depth, and the first page reads a bounded part of the catalog.
func TestFirstPageIsCertainFromTheTail(t *testing.T) {
	const n = 2000
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "TAIL")
	genSessions(t, st, n)
	for _, opts := range []session.ListOptions{{Agent: "agent3", Limit: 50}, {Limit: 100}, {Agent: "agent9", Limit: 30}} {
		// Every page of one agent; the first three of all.
		if got, want := firstPages(t, st, opts, 3+100*len(opts.Agent)), expectedFirst(t, st, opts, 3+100*len(opts.Agent)); !reflect.DeepEqual(got, want) {
			t.Errorf("%+v: %d pages, the listing's %d; first %v, want %v", opts, len(got), len(want), got[0], want[0])
		}
	}
	before := st.nc.Stats().InMsgs
	if _, err := st.ListPage(stdctx.Background(), session.ListOptions{Agent: "agent3", Limit: 50}); err != nil {
		t.Fatal(err)
	}
	// 50 entries, those of one agent in the skew's minute past the page's
	// end, and two answers per checked session; the agent has 200.
	if got := st.nc.Stats().InMsgs - before; got > 250 {
		t.Errorf("the first page took %d messages; want a bounded read (about 170)", got)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// TestPageReadsPastItsWindowWhileClocksMayDisagree: the catalog is in the
// order entries were stored, which may differ from their updates by the
// clocks' skew. Session r1 was updated after r2 but stored just before
// it, just outside the first window a page of one reads; the page reads
// on until no entry stored earlier can be newer, and shows r1.
func TestPageReadsPastItsWindowWhileClocksMayDisagree(t *testing.T) {
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "SKEW")
	ctx := stdctx.Background()
	base := time.Now().Add(-time.Hour).UTC()
	put := func(id, agent string, stored, updated time.Time) uint64 {
		t.Helper()
		x := indexEntry{Agent: agent, Created: updated, Updated: updated, Turns: 1, Events: 1, Msgs: 1, Ended: true}
		if agent == "rare" {
			// A log, so that the check finds the entry current.
			ack, err := st.js.Publish(ctx, Subject(st.cfg.SubjectPrefix, id), []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			x.Born, x.Last = ack.Sequence, ack.Sequence
		}
		b := mustJSON(t, catalogEntry{indexEntry: x, Mark: stored.Add(catalogSkew)})
		ack, err := st.js.Publish(ctx, st.cat.entrySubject(agent, id), b)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Sequence
	}
	r1 := put("r1", "rare", base, base.Add(20*time.Second))
	put("r2", "rare", base.Add(time.Second), base.Add(10*time.Second))
	// The first window is the last 256 entries: r2 and 255 others.
	for k, seq := 0, r1+1; seq < r1+256; k++ {
		at := base.Add(time.Duration(2+k) * time.Second)
		seq = put(fmt.Sprintf("f%03d", k), "filler", at, at)
	}
	p, err := st.ListPage(ctx, session.ListOptions{Agent: "rare", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(p.Sessions); !reflect.DeepEqual(got, []string{"r1"}) || p.Next == "" {
		t.Errorf("page %v next %q, want [r1] and a next page", got, p.Next)
	}
	p, err = st.ListPage(ctx, session.ListOptions{Agent: "rare", Limit: 1, Cursor: p.Next})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(p.Sessions); !reflect.DeepEqual(got, []string{"r2"}) {
		t.Errorf("second page %v, want [r2]", got)
	}
}

// TestCatalogFollowsTheWriter: a session resumed by another agent moves
// to that agent's pages, its entry under the former one gone; a session
// resumed and left unchanged leaves no open marker behind.
func TestCatalogFollowsTheWriter(t *testing.T) {
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "FOLLOW")
	ctx := stdctx.Background()
	writeTurn(t, st, "moved", "main", 1)
	writeTurn(t, st, "stays", "main", 1)
	writeTurn(t, st, "moved", "review", 2)
	// Gone by the writer's hand, before any listing could repair it.
	if _, err := st.cat.leader.Last(ctx, st.cat.entrySubject("main", "moved")); err != jetstream.ErrMsgNotFound {
		t.Errorf("the entry under the former agent: %v, want it removed", err)
	}
	for agent, want := range map[string][]string{"main": {"stays"}, "review": {"moved"}} {
		p, err := st.ListPage(ctx, session.ListOptions{Agent: agent, Limit: 5})
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(p.Sessions); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: page %v, want %v", agent, got, want)
		}
	}
	wr, err := st.lock(ctx, "stays", true)
	if err != nil {
		t.Fatal(err)
	}
	if n := markerCount(t, st); n != 1 {
		t.Errorf("%d open markers while the session is held; want 1", n)
	}
	if err := wr.Release(); err != nil {
		t.Fatal(err)
	}
	if n := markerCount(t, st); n != 0 {
		t.Errorf("%d open markers after a resume that wrote nothing; want 0", n)
	}
}

// TestPageShowsASessionWhoseWriterDiedBeforeItsFirstEntry: a writer marks
// a new session open, stores its open record and a first event, and dies
// before any index or catalog entry: the session has a log and a marker
// only. A page shows it, from its log, and stores its entry.
func TestPageShowsASessionWhoseWriterDiedBeforeItsFirstEntry(t *testing.T) {
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "ORPHAN")
	writeTurn(t, st, "older", "main", 1)
	ctx := stdctx.Background()
	if _, err := st.markCatalog(ctx, "orphan"); err != nil {
		t.Fatal(err)
	}
	subject := Subject(st.cfg.SubjectPrefix, "orphan")
	born, err := st.markOpen(ctx, subject, "dead")
	if err != nil {
		t.Fatal(err)
	}
	e := session.Event{Seq: 1, Type: session.UserMessage, Turn: 1, Time: time.Now().UTC(), Message: &llm.Message{Role: llm.RoleUser, Content: "lost?"}}
	wr := &writer{store: st, id: "orphan", subject: subject}
	if _, err := st.js.PublishMsg(ctx, wr.message(outgoing{event: e, data: mustJSON(t, e)}, author{agent: "main"}),
		jetstream.WithExpectLastSequencePerSubject(born)); err != nil {
		t.Fatal(err)
	}
	p, err := st.ListPage(ctx, session.ListOptions{Agent: "main", Limit: 5})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(p.Sessions); !reflect.DeepEqual(got, []string{"orphan", "older"}) {
		t.Fatalf("page %v, want [orphan older]", got)
	}
	if s := p.Sessions[0]; s.Title != "lost?" || s.State != session.StateInterrupted || s.LastSeq != 1 {
		t.Errorf("orphan listed as %+v; want its log's title, interrupted, event 1", s)
	}
	if n := markerCount(t, st); n != 0 {
		t.Errorf("%d open markers after the repair; want 0", n)
	}
	if _, err := st.cat.leader.Last(ctx, st.cat.entrySubject("main", "orphan")); err != nil {
		t.Errorf("the repaired entry: %v", err)
	}
}

// TestAPageReadsFurtherWhenACheckLeavesASessionOut: the newest entry of
// the agent names a log that is gone (a retention limit took it, or a
// delete's catalog purge failed). The check leaves it out, and the page's
// next candidate is not newer than everything stored before the windows
// read: an older window holds a newer session, which the walk must show
// first, not skip for good.
func TestAPageReadsFurtherWhenACheckLeavesASessionOut(t *testing.T) {
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "GHOST")
	ctx := stdctx.Background()
	base := time.Now().Add(-time.Hour).UTC()
	put := func(id, agent string, stored, updated time.Time, withLog bool) {
		t.Helper()
		x := indexEntry{Agent: agent, Created: updated, Updated: updated, Turns: 1, Events: 1, Msgs: 1, Ended: true}
		if withLog {
			ack, err := st.js.Publish(ctx, Subject(st.cfg.SubjectPrefix, id), []byte(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			x.Born, x.Last = ack.Sequence, ack.Sequence
		}
		b := mustJSON(t, catalogEntry{indexEntry: x, Mark: stored.Add(catalogSkew)})
		if _, err := st.js.Publish(ctx, st.cat.entrySubject(agent, id), b); err != nil {
			t.Fatal(err)
		}
	}
	put("old1", "rare", base, base.Add(68*time.Second), true)
	for k := range 300 {
		at := base.Add(time.Duration(1+k) * time.Second)
		put(fmt.Sprintf("f%03d", k), "filler", at, at, true)
	}
	put("new2", "rare", base.Add(10*time.Second), base.Add(65*time.Second), true)
	put("ghost", "rare", base.Add(150*time.Second), base.Add(149*time.Second), false)
	var walked []string
	cursor := ""
	for range 5 {
		p, err := st.ListPage(ctx, session.ListOptions{Agent: "rare", Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		walked = append(walked, ids(p.Sessions)...)
		if p.Next == "" {
			break
		}
		cursor = p.Next
	}
	if !reflect.DeepEqual(walked, []string{"old1", "new2"}) {
		t.Fatalf("the walk of agent rare showed %v, want [old1 new2]", walked)
	}
}

// TestStepsOfAHeldSessionWriteNoCatalogEntry: while a writer holds its
// session, its steps write the log and the index, not the catalog — its
// open marker stands in for the entry — yet a page shows the session as
// its last step left it, first and open. Its release stores the entry,
// at the catalog's tail, so a page without the marker still finds it.
func TestStepsOfAHeldSessionWriteNoCatalogEntry(t *testing.T) {
	srv := natstest.Single(t)
	st := testStore(t, srv.ClientURL(), "HELDSTEPS")
	ctx := stdctx.Background()
	writeTurn(t, st, "busy", "main", 1)
	writeTurn(t, st, "quiet", "main", 1)
	wr, err := st.lock(ctx, "busy", true)
	if err != nil {
		t.Fatal(err)
	}
	catEnd := func() uint64 {
		t.Helper()
		info, err := st.cat.stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	before := catEnd() // the open marker is in
	for n := 2; n <= 4; n++ {
		appendTurn(t, wr, "main", n)
	}
	wr.index.done.Wait()
	if got := catEnd(); got != before {
		t.Errorf("the catalog went from sequence %d to %d over three steps of a held session; want no write", before, got)
	}
	p, err := st.ListPage(ctx, session.ListOptions{Agent: "main", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Sessions[0]; s.ID != "busy" || s.Turns != 4 || s.LastSeq != 12 || s.State != session.StateOpen {
		t.Errorf("first %+v, want busy open at turn 4, event 12", s)
	}
	if err := wr.Release(); err != nil {
		t.Fatal(err)
	}
	if n := markerCount(t, st); n != 0 {
		t.Errorf("%d open markers after the release; want 0", n)
	}
	m, err := st.cat.leader.Last(ctx, st.cat.entrySubject("main", "busy"))
	if err != nil {
		t.Fatal(err)
	}
	var ce catalogEntry
	if err := json.Unmarshal(m.Data, &ce); err != nil || ce.Turns != 4 || ce.Events != 12 {
		t.Errorf("the catalog entry after the release: %+v (%v); want turn 4, event 12", ce.indexEntry, err)
	}
	if m.Sequence <= before {
		t.Errorf("the entry stored at %d, not after the steps (catalog end before them %d)", m.Sequence, before)
	}
	p, err = st.ListPage(ctx, session.ListOptions{Agent: "main", Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := p.Sessions[0]; s.ID != "busy" || s.Turns != 4 || s.State == session.StateOpen {
		t.Errorf("first after the release %+v, want busy at turn 4, not open", s)
	}
}
