package jsonl

import (
	stdctx "context"
	"os"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testkit"
	"github.com/dsh-go/dsh/services/session"
)

// BenchmarkCatalogList lists 100,000 stored sessions of 10 agents (issue
// 38: the first page of 50 of one agent, newest first, in 100 ms). The
// floor is reading the directory's 100,000 names (getdents, as a listing
// without a census does). "page-fast" is the first page of one agent with
// a census the directory agrees with (no directory read, no log read);
// "page-slow" the same page with the census stale (the directory's mtime
// moved: it reads the names and writes a census again); "all" every
// session (with the census); "logs" the listing before the catalog (each
// log's head and tail). "rebuild" is the first listing of a store without
// a catalog: it reads every log and writes the catalog. The parent writes
// the 100,000 logs once for all of them.
//
//	go test -run '^$' -bench CatalogList -benchtime 3x -count 2 ./plugins/session/jsonl/
func BenchmarkCatalogList(b *testing.B) {
	const n = 100_000
	dir := b.TempDir()
	genStore(b, dir, n, 10)
	w := newFiles(dir)
	if _, err := w.List(stdctx.Background()); err != nil { // writes the catalog
		b.Fatal(err)
	}
	cpu := func(b *testing.B, start time.Duration) {
		b.ReportMetric(float64(testkit.CPUTime()-start)/float64(b.N)/1e6, "cpu-ms/op")
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e6, "wall-ms/op")
	}
	// settle ages the directory past the census margin and lists once,
	// which writes a census.
	settle := func(b *testing.B) {
		past := time.Now().Add(-time.Hour)
		if err := os.Chtimes(dir, past, past); err != nil {
			b.Fatal(err)
		}
		if _, err := w.List(stdctx.Background()); err != nil {
			b.Fatal(err)
		}
	}
	page := func(b *testing.B) {
		p, err := w.ListPage(stdctx.Background(), session.ListOptions{Agent: "agent3", Limit: 50})
		if err != nil || len(p.Sessions) != 50 || p.Next == "" {
			b.Fatalf("a page of %d (%v)", len(p.Sessions), err)
		}
	}
	b.Run("rebuild", func(b *testing.B) {
		b.ReportAllocs()
		start := testkit.CPUTime()
		for range b.N {
			os.Remove(dir + "/" + catalogName)
			if list, err := w.List(stdctx.Background()); err != nil || len(list) != n {
				b.Fatalf("listed %d (%v)", len(list), err)
			}
		}
		cpu(b, start)
	})
	b.Run("floor-readdir", func(b *testing.B) {
		b.ReportAllocs()
		start := testkit.CPUTime()
		for range b.N {
			logs := 0
			if err := eachLogName(dir, func([]byte) { logs++ }); err != nil || logs != n {
				b.Fatalf("read %d names (%v)", logs, err)
			}
		}
		cpu(b, start)
	})
	b.Run("page-fast", func(b *testing.B) {
		settle(b)
		b.ReportAllocs()
		w.logReads.Store(0)
		w.dirReads.Store(0)
		b.ResetTimer()
		start := testkit.CPUTime()
		for range b.N {
			page(b)
		}
		cpu(b, start)
		if r, d := w.logReads.Load(), w.dirReads.Load(); r != 0 || d != 0 {
			b.Fatalf("read %d logs, the directory %d times", r, d)
		}
	})
	b.Run("page-slow", func(b *testing.B) {
		b.ReportAllocs()
		w.logReads.Store(0)
		w.dirReads.Store(0)
		start := testkit.CPUTime()
		for i := range b.N {
			past := time.Now().Add(-time.Hour - time.Duration(i)*time.Second)
			if err := os.Chtimes(dir, past, past); err != nil {
				b.Fatal(err)
			}
			page(b)
		}
		cpu(b, start)
		if r, d := w.logReads.Load(), w.dirReads.Load(); r != 0 || d != int64(b.N) {
			b.Fatalf("read %d logs, the directory %d times in %d listings", r, d, b.N)
		}
	})
	b.Run("all", func(b *testing.B) {
		settle(b)
		b.ReportAllocs()
		b.ResetTimer()
		start := testkit.CPUTime()
		for range b.N {
			if list, err := w.List(stdctx.Background()); err != nil || len(list) != n {
				b.Fatalf("listed %d (%v)", len(list), err)
			}
		}
		cpu(b, start)
	})
	b.Run("logs", func(b *testing.B) {
		b.ReportAllocs()
		start := testkit.CPUTime()
		for range b.N {
			if list, _, err := w.list(stdctx.Background()); err != nil || len(list) != n {
				b.Fatalf("listed %d (%v)", len(list), err)
			}
		}
		cpu(b, start)
	})
}
