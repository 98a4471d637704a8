package jsonl

import (
	"bytes"
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// settle makes dir look unchanged for an hour and lists twice: the first
// listing reads the directory and writes a census, the second must not
// read the directory.
func settle(t *testing.T, w *files) {
	t.Helper()
	past := time.Now().Add(-time.Hour)
	if err := os.Chtimes(w.dir, past, past); err != nil {
		t.Fatal(err)
	}
	if _, err := w.List(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	fast(t, w)
}

// fast lists with the census: no directory read, no log read.
func fast(t *testing.T, w *files) []session.Summary {
	t.Helper()
	dirs, logs := w.dirReads.Load(), w.logReads.Load()
	list, err := w.List(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	if d, l := w.dirReads.Load()-dirs, w.logReads.Load()-logs; d != 0 || l != 0 {
		t.Fatalf("a listing with a census read the directory %d times and %d logs", d, l)
	}
	return list
}

// slow lists and says it read the directory.
func slow(t *testing.T, w *files) []session.Summary {
	t.Helper()
	dirs := w.dirReads.Load()
	list := sameAsLogs(t, w)
	if w.dirReads.Load() == dirs {
		t.Fatal("the listing did not read the directory")
	}
	return list
}

// TestACensusSparesTheDirectory2000: with a census the directory still
// agrees with, pages of 2,000 sessions read neither the directory nor a
// log, give what the logs give, and allocate a fraction of the catalog's
// size. (BenchmarkCatalogList runs 100,000.)
func TestACensusSparesTheDirectory2000(t *testing.T) {
	const n = 2000
	dir := t.TempDir()
	genStore(t, dir, n, 10)
	w := newFiles(dir)
	all := slow(t, w) // writes the catalog
	settle(t, w)
	if got := fast(t, w); len(got) != n {
		t.Fatalf("listed %d sessions", len(got))
	}
	want, _ := session.Paginate(slices.Clone(all), session.ListOptions{Agent: "agent3", Limit: 50})
	dirs := w.dirReads.Load()
	p, err := w.ListPage(stdctx.Background(), session.ListOptions{Agent: "agent3", Limit: 50})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Sessions) != 50 || p.Next != want.Next {
		t.Fatalf("a page of %d, next %q; want 50, next %q", len(p.Sessions), p.Next, want.Next)
	}
	for i := range p.Sessions {
		if g, l := p.Sessions[i], want.Sessions[i]; g.ID != l.ID || g.Title != l.Title || g.Turns != l.Turns || g.State != l.State || !g.Updated.Equal(l.Updated) {
			t.Fatalf("page %d:\n got  %+v\n want %+v", i, g, l)
		}
	}
	fi, _ := os.Stat(filepath.Join(dir, catalogName))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := w.ListPage(stdctx.Background(), session.ListOptions{Agent: "agent3", Limit: 50}); err != nil {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if per := int64(after.TotalAlloc-before.TotalAlloc) / 10; per > fi.Size()/2 {
		t.Fatalf("a page allocated %d bytes; the catalog is %d", per, fi.Size())
	}
	if w.dirReads.Load() != dirs || w.logReads.Load() != n {
		t.Fatalf("the pages read the directory %d times, %d logs", w.dirReads.Load()-dirs, w.logReads.Load()-n)
	}
}

// TestTheCensusMissesNoChange: a log copied in or removed by hand, a
// catalog deleted, torn, or with a line removed in place, all show in the
// next listing.
func TestTheCensusMissesNoChange(t *testing.T) {
	dir := t.TempDir()
	genStore(t, dir, 20, 2)
	// Files that are no session need no catalog line to allow a census.
	os.WriteFile(filepath.Join(dir, "bad id.jsonl"), []byte("{}\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("foreign"), 0o600)
	os.Mkdir(filepath.Join(dir, "attachments"), 0o700)
	w := newFiles(dir)
	slow(t, w)
	settle(t, w)

	raw, _ := os.ReadFile(filepath.Join(dir, "g000003.jsonl"))
	os.WriteFile(filepath.Join(dir, "copied.jsonl"), raw, 0o600)
	if got := byID(slow(t, w)); len(got) != 21 || got["copied"].Title != got["g000003"].Title {
		t.Fatalf("the copied log is missing: %d sessions", len(got))
	}
	settle(t, w)
	os.Remove(filepath.Join(dir, "g000004.jsonl"))
	if got := byID(slow(t, w)); len(got) != 20 || got["g000004"].ID != "" {
		t.Fatalf("the removed log is listed: %d sessions", len(got))
	}

	settle(t, w)
	path := filepath.Join(dir, catalogName)
	os.Remove(path)
	if got := slow(t, w); len(got) != 20 {
		t.Fatalf("without the catalog: %d sessions", len(got))
	}

	// In place, the directory's mtime unchanged: the census's count of
	// the lines before it tells.
	settle(t, w)
	cat, _ := os.ReadFile(path)
	lines := splitLines(cat)
	var kept []byte
	dropped := 0
	for _, l := range lines {
		if dropped == 0 && len(l) > 11 && l[9] == kindClosed {
			dropped++
			continue
		}
		kept = append(append(kept, l...), '\n')
	}
	rewrite(t, path, kept)
	if got := slow(t, w); len(got) != 20 {
		t.Fatalf("with a line removed from the catalog: %d sessions", len(got))
	}
	// A line a later one of its session replaced: nothing is missing, but
	// the census chain is broken until a compaction mends it.
	appendTurns(t, w, "twice", "main", appendTurns(t, w, "twice", "main", 0, 1, 1, false), 2, 1, false)
	settle(t, w)
	cat, _ = os.ReadFile(path)
	kept = nil
	dropped = 0
	for _, l := range splitLines(cat) {
		if dropped == 0 && len(l) > 11 && l[9] == kindOpen && string(lineID(l)) == "twice" {
			dropped++
			continue
		}
		kept = append(append(kept, l...), '\n')
	}
	if dropped != 1 {
		t.Fatal("no open line of twice in the catalog")
	}
	rewrite(t, path, kept)
	if got := slow(t, w); len(got) != 21 {
		t.Fatalf("with a replaced line removed: %d sessions", len(got))
	}
	settle(t, w)
	cat, _ = os.ReadFile(path)
	i := len(cat) / 2
	cat[i] ^= 0x55 // a garbled line in the middle
	rewrite(t, path, cat)
	if got := slow(t, w); len(got) != 21 {
		t.Fatalf("with a garbled catalog line: %d sessions", len(got))
	}
	settle(t, w)
}

// TestARacyCensusExpires: a census written less than the margin after the
// directory changed is trusted only until the margin has passed; a log
// copied in within the tick of that change (mtime left as it was) shows
// then.
func TestARacyCensusExpires(t *testing.T) {
	dir := t.TempDir()
	genStore(t, dir, 10, 2)
	w := newFiles(dir)
	w.censusMargin = 300 * time.Millisecond
	slow(t, w)
	recent := time.Now().Add(-50 * time.Millisecond)
	os.Chtimes(dir, recent, recent)
	slow(t, w) // writes a census with a deadline
	fast(t, w)
	raw, _ := os.ReadFile(filepath.Join(dir, "g000001.jsonl"))
	os.WriteFile(filepath.Join(dir, "racy.jsonl"), raw, 0o600)
	os.Chtimes(dir, recent, recent) // as if in the same tick
	if got := fast(t, w); len(got) != 10 {
		t.Fatalf("inside the margin: %d sessions", len(got))
	}
	time.Sleep(time.Until(recent.Add(w.censusMargin)))
	if got := byID(slow(t, w)); len(got) != 11 || got["racy"].ID == "" {
		t.Fatalf("after the margin: %d sessions", len(got))
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, b[:i])
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}

// rewrite writes the catalog in place, as an editor that keeps the file
// would: the directory's mtime does not change.
func rewrite(t *testing.T, path string, data []byte) {
	t.Helper()
	dir := filepath.Dir(path)
	fi, _ := os.Stat(dir)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(dir); !after.ModTime().Equal(fi.ModTime()) {
		t.Fatal("rewriting the catalog changed the directory")
	}
}

// TestWritersCarryTheCensus: a session created, written and released, a
// session deleted, and a session opened and let go unwritten change the
// directory's names, and the listing after each still needs no directory
// read, and lists what the logs say.
func TestWritersCarryTheCensus(t *testing.T) {
	dir := t.TempDir()
	genStore(t, dir, 20, 2)
	w := newFiles(dir)
	slow(t, w)
	settle(t, w)
	writeLog(t, w, "new", "main", turn(1, "fresh", true))
	if got := byID(fast(t, w)); len(got) != 21 || got["new"].Title != "fresh" {
		t.Fatalf("after a create: %d sessions, new is %+v", len(got), got["new"])
	}
	if err := w.Delete(stdctx.Background(), "g000002"); err != nil {
		t.Fatal(err)
	}
	if got := byID(fast(t, w)); len(got) != 20 || got["g000002"].ID != "" {
		t.Fatalf("after a delete: %d sessions", len(got))
	}
	l, err := w.Lock(stdctx.Background(), "unwritten")
	if err != nil {
		t.Fatal(err)
	}
	// Held and not yet written, it is not stored yet: its log is read
	// (empty), it is not listed, and the directory is not read.
	dirs := w.dirReads.Load()
	if list, err := w.List(stdctx.Background()); err != nil || len(list) != 20 || byID(list)["unwritten"].ID != "" || w.dirReads.Load() != dirs {
		t.Fatalf("a held, unwritten session lists as %+v (%v; %d sessions), %d directory reads", byID(list)["unwritten"], err, len(list), w.dirReads.Load()-dirs)
	}
	l.Release()
	if got := byID(fast(t, w)); len(got) != 20 || got["unwritten"].ID != "" {
		t.Fatalf("after an unwritten session: %d sessions", len(got))
	}
	want, _, _ := w.list(stdctx.Background())
	if len(want) != 20 {
		t.Fatalf("the logs hold %d sessions", len(want))
	}
}

// TestAWriterCarriedCensusExpires: the census a writer carries over its
// change has the margin's deadline: a name changed by hand behind the
// writer's change (here: a log copied in, the directory's mtime put back
// as the writer left it) shows once the margin has passed.
func TestAWriterCarriedCensusExpires(t *testing.T) {
	dir := t.TempDir()
	genStore(t, dir, 10, 2)
	w := newFiles(dir)
	w.censusMargin = 300 * time.Millisecond
	slow(t, w)
	settle(t, w)
	writeLog(t, w, "new", "main", turn(1, "fresh", true))
	fi, _ := os.Stat(dir)
	raw, _ := os.ReadFile(filepath.Join(dir, "g000001.jsonl"))
	os.WriteFile(filepath.Join(dir, "hidden.jsonl"), raw, 0o600)
	os.Chtimes(dir, fi.ModTime(), fi.ModTime())
	if got := fast(t, w); len(got) != 11 {
		t.Fatalf("inside the margin: %d sessions", len(got))
	}
	time.Sleep(time.Until(fi.ModTime().Add(w.censusMargin)))
	if got := byID(slow(t, w)); len(got) != 12 || got["hidden"].ID == "" {
		t.Fatalf("after the margin: %d sessions", len(got))
	}
}

// TestACatalogCutUnderAListingFailsIt: a catalog cut short by hand while
// a listing reads it in place fails that listing, not the process; the
// next lists every session.
func TestACatalogCutUnderAListingFailsIt(t *testing.T) {
	dir := t.TempDir()
	genStore(t, dir, 50, 2)
	w := newFiles(dir)
	slow(t, w)
	settle(t, w)
	path := filepath.Join(dir, catalogName)
	afterMap = func() { os.Truncate(path, 0) }
	_, err := w.List(stdctx.Background())
	afterMap = nil
	if !errs.HasCode(err, session.BadLog) || !strings.Contains(err.Error(), "cut while a listing read it") {
		t.Fatalf("a listing of a catalog cut under it: %v", err)
	}
	if got := slow(t, w); len(got) != 50 {
		t.Fatalf("listed %d sessions after", len(got))
	}
}

// TestACompactionCarriesTheCensus: a compaction that leaves a line for
// every log writes a census for the directory its rename changed, with
// the margin's deadline: the listing after it reads no directory, the
// first one after the margin does.
func TestACompactionCarriesTheCensus(t *testing.T) {
	dir := t.TempDir()
	genStore(t, dir, 30, 2)
	w := newFiles(dir)
	w.censusMargin = 300 * time.Millisecond
	slow(t, w) // every log read, then a compaction
	fi, _ := os.Stat(dir)
	if got := fast(t, w); len(got) != 30 {
		t.Fatalf("listed %d sessions", len(got))
	}
	time.Sleep(time.Until(fi.ModTime().Add(w.censusMargin)))
	slow(t, w)
	fast(t, w)
}

// TestACatalogCutUnderAListingIsUnmapped: the listing a cut catalog
// failed lets go of its mapping too; a process that lists often would
// otherwise keep one stale mapping of the catalog per cut.
func TestACatalogCutUnderAListingIsUnmapped(t *testing.T) {
	dir := t.TempDir()
	genStore(t, dir, 50, 2)
	w := newFiles(dir)
	slow(t, w)
	settle(t, w)
	path := filepath.Join(dir, catalogName)
	afterMap = func() { os.Truncate(path, 0) }
	_, err := w.List(stdctx.Background())
	afterMap = nil
	if !errs.HasCode(err, session.BadLog) {
		t.Fatalf("a listing of a catalog cut under it: %v", err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps: the kernel does not say what is mapped")
	}
	if bytes.Contains(maps, []byte(path)) {
		t.Fatalf("the catalog is still mapped after the failed listing:\n%s", maps)
	}
}

// TestAStaleCensusPageIsCheap: a page after a change of names reads the
// directory once and no log, gives the page the logs give, and allocates
// less than the catalog's size (the lookup table and the directory's
// buffer are reused, not made per listing).
func TestAStaleCensusPageIsCheap(t *testing.T) {
	const n = 2000
	dir := t.TempDir()
	genStore(t, dir, n, 10)
	w := newFiles(dir)
	all := slow(t, w)
	settle(t, w)
	want, _ := session.Paginate(slices.Clone(all), session.ListOptions{Agent: "agent3", Limit: 50})
	fi, _ := os.Stat(filepath.Join(dir, catalogName))
	dirs, logs := w.dirReads.Load(), w.logReads.Load()
	var before, after runtime.MemStats
	const pages = 10
	for i := range pages {
		past := time.Now().Add(-time.Hour - time.Duration(i+1)*time.Second)
		if err := os.Chtimes(dir, past, past); err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			runtime.ReadMemStats(&before) // the first listing fills the pool
		}
		p, err := w.ListPage(stdctx.Background(), session.ListOptions{Agent: "agent3", Limit: 50})
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Sessions) != 50 || p.Next != want.Next || p.Sessions[0].ID != want.Sessions[0].ID || p.Sessions[49].ID != want.Sessions[49].ID {
			t.Fatalf("a stale page of %d, next %q; want 50, next %q", len(p.Sessions), p.Next, want.Next)
		}
	}
	runtime.ReadMemStats(&after)
	if d, l := w.dirReads.Load()-dirs, w.logReads.Load()-logs; d != pages || l != 0 {
		t.Fatalf("%d stale pages read the directory %d times and %d logs", pages, d, l)
	}
	// Made per listing, the table and the getdents buffer alone would be
	// 1.4 times the catalog here; the bound leaves room for the race
	// detector, under which a sync.Pool drops a quarter of what it is given.
	if per := int64(after.TotalAlloc-before.TotalAlloc) / (pages - 1); per > fi.Size() {
		t.Fatalf("a stale page allocated %d bytes; the catalog is %d", per, fi.Size())
	}
}

// TestLongIDsInTheTable: ids of the longest length a session may have go
// through the directory's batches (which copy names) and the table, and a
// hand-written catalog line with an id too long for a slot's length field
// is still found.
func TestLongIDsInTheTable(t *testing.T) {
	const n = 150
	dir := t.TempDir()
	genStore(t, dir, n, 3)
	for i := range n {
		id := fmt.Sprintf("g%06d", i)
		long := id + strings.Repeat("x", session.MaxIDLen-len(id)-i%3)
		if err := os.Rename(filepath.Join(dir, id+".jsonl"), filepath.Join(dir, long+".jsonl")); err != nil {
			t.Fatal(err)
		}
	}
	w := newFiles(dir)
	if got := slow(t, w); len(got) != n {
		t.Fatalf("listed %d of %d", len(got), n)
	}
	settle(t, w)
	past := time.Now().Add(-2 * time.Hour)
	os.Chtimes(dir, past, past)
	if got := slow(t, w); len(got) != n {
		t.Fatalf("listed %d of %d with a stale census", len(got), n)
	}

	tab := &catalogTable{}
	var data []byte
	ids := []string{"a", strings.Repeat("b", idLenUnknown-1), strings.Repeat("c", idLenUnknown), strings.Repeat("d", 300)}
	for _, id := range ids {
		data = append(data, encodeEntry(kindClosed, session.Summary{ID: id, Agent: "ag", Updated: t0})...)
	}
	tab.data = data
	tab.scan()
	for _, id := range ids {
		i := tab.find([]byte(id))
		if i < 0 {
			t.Fatalf("an id of %d bytes is not found", len(id))
		}
		kind, updated, got, agent, ok := tab.headAt(tab.slots[i])
		if !ok || kind != kindClosed || updated != t0.UnixNano() || got != id || agent != "ag" {
			t.Fatalf("the head of an id of %d bytes: %c %d %d bytes %q %v", len(id), kind, updated, len(got), agent, ok)
		}
	}
	if tab.find([]byte(strings.Repeat("c", idLenUnknown+1))) >= 0 || tab.find([]byte(strings.Repeat("d", 299))) >= 0 {
		t.Fatal("a prefix or an extension of an id is found")
	}
}
