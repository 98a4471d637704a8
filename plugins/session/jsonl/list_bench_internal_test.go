package jsonl

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/session"
)

// benchSessions writes n logs of about 1 MB each into a temporary
// directory of b: 40 turns whose assistant answers are 25 KB, encoded as
// the plugin writes them.
func benchSessions(b *testing.B, n int) string {
	benchDir := b.TempDir()
	{
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		answer := strings.Repeat("lorem ipsum ", 25<<10/12)
		var seq int64
		for t := 1; t <= 40; t++ {
			for _, e := range turn(t, fmt.Sprintf("prompt %d: summarize the design", t), true) {
				seq++
				e.Seq, e.Time = seq, t0.Add(time.Duration(seq)*time.Second)
				if e.Type == session.AssistantMessage {
					e.Message.Content = answer
				}
				var v any = e
				if seq == 1 {
					v = first{Event: e, Agent: "main"}
				}
				enc.Encode(v)
			}
		}
		for i := range n {
			if err := os.WriteFile(filepath.Join(benchDir, fmt.Sprintf("s%04d.jsonl", i)), buf.Bytes(), 0o600); err != nil {
				b.Fatal(err)
			}
		}
	}
	return benchDir
}

// BenchmarkList lists 1000 sessions of about 1 MB each (the page cache is
// warm: the files were just written). The parent runs once, so the
// gigabyte is written once for every b.N the sub-benchmark tries.
func BenchmarkList(b *testing.B) {
	const n = 1000
	w := newFiles(benchSessions(b, n))
	b.Run("1000x1MB", func(b *testing.B) { benchList(b, w, n) })
}

func benchList(b *testing.B, w *files, n int) {
	b.ReportAllocs()
	b.ResetTimer()
	var read int64
	for range b.N {
		list, r, err := w.list(stdctx.Background())
		if err != nil || len(list) != n || list[0].Turns != 40 {
			b.Fatalf("listed %d sessions (%v)", len(list), err)
		}
		read += r
	}
	b.ReportMetric(float64(read)/float64(b.N*n), "B-read/session")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/session")
}
