package jsonl

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/services/session"
)

// TestFindReadsOneSessionNotTheDirectory: Find describes a session as the
// listing does — idle, interrupted, held by another process — without
// reading the directory or the catalog; a session not stored, or an id
// that cannot name one, is not found.
func TestFindReadsOneSessionNotTheDirectory(t *testing.T) {
	dir := t.TempDir()
	genStore(t, dir, 60, 3)
	w := newFiles(dir)
	holdElsewhere(t, dir, "g000007")
	listed, err := w.List(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	w.dirReads.Store(0)
	states := map[session.State]int{}
	for _, want := range listed {
		got, found, err := w.Find(stdctx.Background(), want.ID)
		if err != nil || !found {
			t.Fatalf("Find(%s): found %v, %v", want.ID, found, err)
		}
		if got.ID != want.ID || got.Agent != want.Agent || got.Title != want.Title || !got.Created.Equal(want.Created) ||
			!got.Updated.Equal(want.Updated) || got.Turns != want.Turns || got.State != want.State || got.Size != want.Size {
			t.Fatalf("Find and List disagree:\n find %+v\n list %+v", got, want)
		}
		states[got.State]++
	}
	if states[session.StateOpen] != 1 || states[session.StateInterrupted] == 0 || states[session.StateIdle] == 0 {
		t.Fatalf("the store's sessions were found as %v; want idle, interrupted and one open", states)
	}
	for _, id := range []string{"g999999", "../g000001", ""} {
		if sum, found, err := w.Find(stdctx.Background(), id); found || err != nil {
			t.Fatalf("Find(%q): %+v, %v, %v", id, sum, found, err)
		}
	}
	// A directory named like a log is no session, as the listing says.
	if err := os.Mkdir(filepath.Join(dir, "d.jsonl"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, found, err := w.Find(stdctx.Background(), "d"); found || err != nil {
		t.Fatalf("Find of a directory: %v, %v", found, err)
	}
	if n := w.dirReads.Load(); n != 0 {
		t.Fatalf("Find read the directory %d times", n)
	}
}

// BenchmarkFind finds one session by id in stores of 10 and 10,000
// sessions (issue 38): Find reads the one log, so its cost does not grow
// with the store. "list-10000" is what a Find cost before — the whole
// listing (from the catalog) with the one session picked out — and
// "floor-stat" is a stat(2) of the log, which any Find must at least do.
//
//	go test -run '^$' -bench 'Find$' -count 3 ./plugins/session/jsonl/
func BenchmarkFind(b *testing.B) {
	cpu := func(b *testing.B, start time.Duration) {
		b.ReportMetric(float64(testkit.CPUTime()-start)/float64(b.N)/1e3, "cpu-us/op")
	}
	for _, n := range []int{10, 10_000} {
		dir := b.TempDir()
		genStore(b, dir, n, 10)
		w := newFiles(dir)
		if _, err := w.List(stdctx.Background()); err != nil { // writes the catalog
			b.Fatal(err)
		}
		id := fmt.Sprintf("g%06d", n/2)
		if n == 10_000 {
			b.Run("floor-stat", func(b *testing.B) {
				b.ReportAllocs()
				path := filepath.Join(dir, id+".jsonl")
				start := testkit.CPUTime()
				for range b.N {
					if _, err := os.Stat(path); err != nil {
						b.Fatal(err)
					}
				}
				cpu(b, start)
			})
		}
		b.Run(fmt.Sprintf("stored-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			w.dirReads.Store(0)
			start := testkit.CPUTime()
			for range b.N {
				if s, found, err := w.Find(stdctx.Background(), id); err != nil || !found || s.ID != id {
					b.Fatalf("Find(%s): %+v %v %v", id, s, found, err)
				}
			}
			cpu(b, start)
			if r := w.dirReads.Load(); r != 0 {
				b.Fatalf("Find read the directory %d times", r)
			}
		})
		if n == 10_000 {
			b.Run(fmt.Sprintf("list-%d", n), func(b *testing.B) {
				b.ReportAllocs()
				start := testkit.CPUTime()
				for range b.N {
					list, err := w.List(stdctx.Background())
					found := false
					for _, s := range list {
						found = found || s.ID == id
					}
					if err != nil || !found {
						b.Fatalf("listing for %s: %v", id, err)
					}
				}
				cpu(b, start)
			})
		}
	}
}
