package jsonl

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// BenchmarkGroupCommit appends one 300-byte line to each of 1, 10 and 100
// files at once, each append waiting until it is durable, and reports the
// syncs one append costs: with group commit they fall as the writers grow.
//
//	go test -run '^$' -bench GroupCommit ./plugins/session/jsonl/
func BenchmarkGroupCommit(b *testing.B) {
	line := make([]byte, 300)
	line[len(line)-1] = '\n'
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("writers=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			c := newCommitter()
			files := make([]*os.File, n)
			for i := range files {
				f, _, err := openLog(filepath.Join(dir, fmt.Sprintf("s%d.jsonl", i)))
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				files[i] = f
			}
			b.ResetTimer()
			for b.Loop() {
				var wg sync.WaitGroup
				for _, f := range files {
					wg.Go(func() {
						if err := appendTo(f, line, func(f *os.File) error { return c.sync(f, false) }); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			appends := float64(b.N * n)
			b.ReportMetric(float64(c.count())/appends, "syncs/append")
			b.ReportMetric(appends/b.Elapsed().Seconds(), "appends/s")
		})
	}
}
