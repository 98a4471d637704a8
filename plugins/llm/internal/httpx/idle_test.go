package httpx

import (
	"bytes"
	stdctx "context"
	"io"
	"testing"
	"time"
)

// BenchmarkWatchedRead is the idle clock's cost on every read of a stream
// body: arming and stopping one timer.
func BenchmarkWatchedRead(b *testing.B) {
	data := bytes.Repeat([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"token\"}}]}\n\n"), 64)
	for _, idle := range []time.Duration{0, time.Minute} {
		name := "unwatched"
		if idle > 0 {
			name = "watched"
		}
		b.Run(name, func(b *testing.B) {
			c := &Client{Provider: "bench", IdleTimeout: idle}
			buf := make([]byte, 64)
			b.ReportAllocs()
			for b.Loop() {
				ctx, cancel := stdctx.WithCancel(stdctx.Background())
				body := c.watch(ctx, io.NopCloser(bytes.NewReader(data)), cancel, "http://x")
				for {
					if _, err := body.Read(buf); err != nil {
						break
					}
				}
				body.Close()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*(len(data)/len(buf)+1)), "ns/read")
		})
	}
}
