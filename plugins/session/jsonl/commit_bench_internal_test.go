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
// alone=true is the same with every append syncing its own file
// (fdatasync, as many at once as there are writers), the cost without
// group commit.
//
//	go test -run '^$' -bench GroupCommit ./plugins/session/jsonl/
func BenchmarkGroupCommit(b *testing.B) {
	line := make([]byte, 300)
	line[len(line)-1] = '\n'
	for _, n := range []int{1, 10, 100} {
		for _, alone := range []bool{false, true} {
			b.Run(fmt.Sprintf("writers=%d/alone=%v", n, alone), func(b *testing.B) {
				benchCommit(b, n, alone, line)
			})
		}
	}
}

func benchCommit(b *testing.B, n int, alone bool, line []byte) {
	{
		{
			dir := b.TempDir()
			c := newCommitter(false)
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
						sync := func(f *os.File) error { return c.sync(f, false) }
						if alone {
							sync = func(f *os.File) error { return syncAlone(f, false) }
						}
						if err := appendTo(f, line, sync); err != nil {
							b.Error(err)
						}
					})
				}
				wg.Wait()
			}
			appends := float64(b.N * n)
			syncs := float64(c.count())
			if alone {
				syncs = appends
			}
			b.ReportMetric(syncs/appends, "syncs/append")
			b.ReportMetric(appends/b.Elapsed().Seconds(), "appends/s")
		}
	}
}
