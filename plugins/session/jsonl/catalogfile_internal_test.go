package jsonl

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/session"
)

// genStore writes n logs into dir as the plugin writes them, with no
// catalog: session gNNNNNN of agent "agent<i%agents>", one turn, updated
// at a time scattered over n seconds; every 13th stops inside its turn.
func genStore(tb testing.TB, dir string, n, agents int) {
	tb.Helper()
	var buf bytes.Buffer
	for i := range n {
		buf.Reset()
		enc := json.NewEncoder(&buf)
		base := t0.Add(time.Duration(i*7919%n) * time.Second)
		for j, e := range turn(1, fmt.Sprintf("task %d: summarize the design", i), i%13 != 0) {
			e.Seq, e.Time = int64(j+1), base.Add(time.Duration(j)*time.Millisecond)
			var v any = e
			if j == 0 {
				v = first{Event: e, Agent: fmt.Sprintf("agent%d", i%agents)}
			}
			enc.Encode(v)
		}
		id := fmt.Sprintf("g%06d", i)
		if err := os.WriteFile(filepath.Join(dir, id+".jsonl"), buf.Bytes(), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
}

// appendTurns opens session id again through the plugin's writer and
// appends turns from turn from, numbering events after seq; crash leaves
// it as a killed writer would: the log written, the lock dropped by the
// kernel, no closed line in the catalog.
func appendTurns(t *testing.T, w *files, id, agent string, seq int64, from, turns int, crash bool) int64 {
	t.Helper()
	wr, err := w.lock(id, true)
	if err != nil {
		t.Fatal(err)
	}
	for n := from; n < from+turns; n++ {
		for _, e := range turn(n, fmt.Sprintf("prompt %d", n), true) {
			seq++
			e.Seq, e.Time = seq, t0.Add(time.Duration(seq)*time.Second)
			wr.add(agent, "", e)
		}
	}
	if err := wr.write(seq); err != nil {
		t.Fatal(err)
	}
	if !crash {
		wr.Release()
		return seq
	}
	wr.io.Lock()
	wr.file.Close()
	wr.io.Unlock()
	wr.lock.Close() // the holder record stays, as after a kill
	w.writers.Forget(id, wr)
	return seq
}

// sameAsLogs checks a catalog listing against the logs' own summaries.
func sameAsLogs(t *testing.T, w *files) []session.Summary {
	t.Helper()
	got, err := w.List(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	want, _, err := w.list(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(want, func(a, b session.Summary) int {
		if session.Newer(a, b) {
			return -1
		}
		return 1
	})
	if len(got) != len(want) {
		t.Fatalf("the catalog lists %d sessions, the logs hold %d", len(got), len(want))
	}
	for i := range want {
		g, l := got[i], want[i]
		if g.ID != l.ID || g.Agent != l.Agent || g.Title != l.Title || !g.Created.Equal(l.Created) ||
			!g.Updated.Equal(l.Updated) || g.Turns != l.Turns || g.State != l.State || g.Size != l.Size || g.Tenant != l.Tenant {
			t.Fatalf("listing %d:\n catalog %+v\n logs    %+v", i, g, l)
		}
	}
	return got
}

// TestTheCatalogSparesTheLogsAndAgreesWithThem: a session its writer
// released is listed from the catalog alone, as its log says; a log the
// catalog does not know (copied in) is read once, then recorded.
func TestTheCatalogSparesTheLogsAndAgreesWithThem(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	writeLog(t, w, "a", "main", turn(1, "first", true), turn(2, "second", true))
	writeLog(t, w, "b", "other", turn(1, "cut", false))
	raw, _ := os.ReadFile(filepath.Join(dir, "a.jsonl"))
	os.WriteFile(filepath.Join(dir, "copied.jsonl"), raw, 0o600)

	sameAsLogs(t, w)
	if n := w.logReads.Swap(0); n != 1 {
		t.Fatalf("the first listing read %d logs; want only the copied one", n)
	}
	list := sameAsLogs(t, w)
	if n := w.logReads.Load(); n != 0 {
		t.Fatalf("the second listing read %d logs; the catalog knows them all", n)
	}
	if b := byID(list)["b"]; b.State != session.StateInterrupted || b.Agent != "other" || b.Title != "cut" {
		t.Fatalf("b lists as %+v", b)
	}
}

// TestACrashLeavesTheCatalogBehindNotWrong: a writer killed after writing
// its log never wrote its closed line; the listing then reads the log —
// the turn the catalog missed is listed — and records it.
func TestACrashLeavesTheCatalogBehindNotWrong(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	seq := appendTurns(t, w, "s", "main", 0, 1, 1, false)
	if got := sameAsLogs(t, w); got[0].Turns != 1 {
		t.Fatalf("listed %+v", got)
	}
	appendTurns(t, w, "s", "main", seq, 2, 2, true) // the catalog still says 1 turn
	w.logReads.Store(0)
	if got := sameAsLogs(t, w); got[0].Turns != 3 || got[0].State != session.StateIdle {
		t.Fatalf("after the crash the session lists as %+v; want its 3 turns", got[0])
	}
	if n := w.logReads.Swap(0); n != 1 {
		t.Fatalf("the listing read %d logs; want the crashed one", n)
	}
	sameAsLogs(t, w)
	if n := w.logReads.Load(); n != 0 {
		t.Fatalf("the crashed session was not recorded: the next listing read %d logs", n)
	}
}

// TestAnOpenSessionIsReadFromItsLog: while a writer holds a session, the
// catalog cannot vouch for it; the listing reads its log and says who
// holds it.
func TestAnOpenSessionIsReadFromItsLog(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	seq := appendTurns(t, w, "s", "main", 0, 1, 1, false)
	wr, err := w.lock("s", true)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Release()
	for _, e := range turn(2, "more", true) {
		seq++
		e.Seq, e.Time = seq, t0.Add(time.Duration(seq)*time.Second)
		wr.add("main", "", e)
	}
	if err := wr.write(seq); err != nil {
		t.Fatal(err)
	}
	list, err := w.List(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	if s := list[0]; s.Turns != 2 || s.State != session.StateOpen || s.Holder == "" {
		t.Fatalf("the held session lists as %+v", s)
	}
}

// TestATornOrLostCatalogLosesNoSession: garbage in the middle of the
// catalog, a torn last line, or no catalog at all: every session is still
// listed as its log says.
func TestATornOrLostCatalogLosesNoSession(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	for i := range 5 {
		appendTurns(t, w, fmt.Sprintf("s%d", i), "main", 0, 1, i+1, false)
	}
	path := filepath.Join(dir, catalogName)
	raw, _ := os.ReadFile(path)
	// Flip a byte of a closed line (its CRC no longer matches) and tear
	// the last line in two.
	i := bytes.Index(raw, []byte("\tc\t"))
	raw[i+5] ^= 1
	os.WriteFile(path, raw[:len(raw)-7], 0o600)
	sameAsLogs(t, w)
	os.Remove(path)
	sameAsLogs(t, w)
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the listing did not rebuild the catalog: %v", err)
	}
	w.logReads.Store(0)
	sameAsLogs(t, w)
	if n := w.logReads.Load(); n != 0 {
		t.Fatalf("after the rebuild a listing read %d logs", n)
	}
}

// TestDeletedSessionsLeaveTheCatalog: a deleted session is not listed,
// and compaction drops its lines.
func TestDeletedSessionsLeaveTheCatalog(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	for i := range 3 {
		appendTurns(t, w, fmt.Sprintf("s%d", i), "main", 0, 1, 1, false)
	}
	if err := w.Delete(stdctx.Background(), "s1"); err != nil {
		t.Fatal(err)
	}
	if got := sameAsLogs(t, w); len(got) != 2 {
		t.Fatalf("listed %+v", got)
	}
	cat, _ := readCatalog(filepath.Join(dir, catalogName))
	w.compact(cat, nil)
	cat, _ = readCatalog(filepath.Join(dir, catalogName))
	sessions := 0
	for _, e := range cat.entries {
		if e.kind != kindCensus {
			sessions++
		}
	}
	if _, ok := cat.last["s1"]; ok || sessions != 2 {
		t.Fatalf("after compaction the catalog holds %d session lines: %v", sessions, cat.last)
	}
}

// TestPagesFilterAndOrder2000: 2,000 sessions of 10 agents, listed by
// pages of 50 through the catalog, give what the logs give, filtered and
// sorted; the catalog built by the first listing spares every later one
// the logs. (BenchmarkCatalogList runs 100,000.)
func TestPagesFilterAndOrder2000(t *testing.T) {
	const n = 2000
	dir := t.TempDir()
	genStore(t, dir, n, 10)
	w := newFiles(dir)
	all := sameAsLogs(t, w)
	if n := w.logReads.Swap(0); n != 2000 {
		t.Fatalf("the first listing read %d logs; want them all", n)
	}
	for _, agent := range []string{"", "agent3", "agent3@", "nobody"} {
		want, _ := session.Paginate(slices.Clone(all), session.ListOptions{Agent: agent})
		var got []session.Summary
		opts := session.ListOptions{Agent: agent, Limit: 50}
		for pages := 0; ; pages++ {
			p, err := w.ListPage(stdctx.Background(), opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Sessions) > 50 || (p.Next != "" && len(p.Sessions) != 50) {
				t.Fatalf("a page of %d sessions, next %q", len(p.Sessions), p.Next)
			}
			got = append(got, p.Sessions...)
			if p.Next == "" {
				break
			}
			opts.Cursor = p.Next
		}
		if len(got) != len(want.Sessions) {
			t.Fatalf("agent %q: the pages hold %d sessions; want %d", agent, len(got), len(want.Sessions))
		}
		for i := range got {
			if got[i].ID != want.Sessions[i].ID || !session.MatchAgent(got[i].Agent, agent) {
				t.Fatalf("agent %q: session %d is %s of %s; want %s", agent, i, got[i].ID, got[i].Agent, want.Sessions[i].ID)
			}
		}
		if agent == "agent3" && len(got) != n/10 {
			t.Fatalf("agent3 has %d sessions; want %d", len(got), n/10)
		}
	}
	if n := w.logReads.Load(); n != 0 {
		t.Fatalf("the pages read %d logs", n)
	}
	if _, err := w.ListPage(stdctx.Background(), session.ListOptions{Cursor: "nonsense"}); err == nil {
		t.Fatal("a bad cursor was taken")
	}
}

// TestListingsRaceWritersAndLoseNothing: listings compacting the catalog
// while writers open, append to and release sessions; once the writers
// are done, a listing agrees with every log, and the one after reads none.
func TestListingsRaceWritersAndLoseNothing(t *testing.T) {
	dir := t.TempDir()
	genStore(t, dir, 50, 3) // unknown to the catalog: every listing repairs some
	w := newFiles(dir)
	stop := make(chan struct{})
	listed := make(chan error)
	for range 2 {
		go func() {
			for {
				select {
				case <-stop:
					listed <- nil
					return
				default:
				}
				if _, err := w.ListPage(stdctx.Background(), session.ListOptions{Limit: 5}); err != nil {
					listed <- err
					return
				}
			}
		}()
	}
	seqs := map[string]int64{}
	for round := range 4 {
		for i := range 5 {
			id := fmt.Sprintf("w%d", i)
			seqs[id] = appendTurns(t, w, id, "main", seqs[id], round+1, 1, round == 3 && i%2 == 0)
		}
	}
	close(stop)
	for range 2 {
		if err := <-listed; err != nil {
			t.Fatal(err)
		}
	}
	got := byID(sameAsLogs(t, w))
	if got["w1"].Turns != 4 || got["w0"].Turns != 4 {
		t.Fatalf("w0 %+v, w1 %+v", got["w0"], got["w1"])
	}
	w.logReads.Store(0)
	sameAsLogs(t, w)
	if n := w.logReads.Load(); n != 0 {
		t.Fatalf("after the race a listing read %d logs", n)
	}
}

// TestALineAfterATornTailIsKept: a line torn by a crash (no newline) must
// not swallow the next append: the open line a writer adds after it is
// read, so the session its crashed writer changed is read from its log,
// not trusted from the closed line before.
func TestALineAfterATornTailIsKept(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	seq := appendTurns(t, w, "s", "main", 0, 1, 1, false)
	f, err := os.OpenFile(filepath.Join(dir, catalogName), os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("1\tc\ttorn")
	f.Close()
	appendTurns(t, w, "s", "main", seq, 2, 1, true)
	if got := sameAsLogs(t, w); got[0].Turns != 2 {
		t.Fatalf("the session lists %d turns, its log holds 2", got[0].Turns)
	}
}
