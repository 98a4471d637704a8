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
// floor is reading the directory's 200,000 names (getdents, as the
// listing does), which any listing that trusts the directory over its
// catalog must do; "page" is the first page of one
// agent, "all" every session, and "logs" the listing before the catalog
// (each log's head and tail). "rebuild" is the first listing of a store
// without a catalog: it reads every log and writes the catalog. The parent
// writes the 200,000 files once for all of them.
//
//	go test -run '^$' -bench CatalogList -benchtime 20x -count 3 ./plugins/session/jsonl/
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
	b.Run("page-agent-50", func(b *testing.B) {
		b.ReportAllocs()
		w.logReads.Store(0)
		start := testkit.CPUTime()
		for range b.N {
			p, err := w.ListPage(stdctx.Background(), session.ListOptions{Agent: "agent3", Limit: 50})
			if err != nil || len(p.Sessions) != 50 || p.Next == "" {
				b.Fatalf("a page of %d (%v)", len(p.Sessions), err)
			}
		}
		cpu(b, start)
		if r := w.logReads.Load(); r != 0 {
			b.Fatalf("read %d logs", r)
		}
	})
	b.Run("all", func(b *testing.B) {
		b.ReportAllocs()
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
