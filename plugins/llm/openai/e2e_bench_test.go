//go:build unix

package openai

import (
	stdctx "context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/services/llm"
)

// BenchmarkStreamEndToEnd streams a 2,000-chunk answer through the provider
// from a local server that replays a recorded stream, flushing each event as
// a real server does: what a user waits for, minus the model. It reports
// wall and CPU time (the whole process: client and server) per stream and
// per chunk; CPU time is the steadier figure on a shared machine.
func BenchmarkStreamEndToEnd(b *testing.B) {
	events := recordedAnswer(b, 2000)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range events {
			if _, err := w.Write(ev); err != nil {
				return
			}
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	p, err := NewOpenAI(Config{Common: httpx.Common{BaseURL: srv.URL, Model: "m"}}, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	chunks := 0
	cpu0 := cpuTime(b)
	for b.Loop() {
		chunks += streamOnce(b, p)
	}
	cpu := cpuTime(b) - cpu0
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/stream")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(chunks), "cpu-ns/chunk")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(chunks), "ns/chunk")
}

// streamOnce streams one answer to its end and returns how many chunks it
// gave.
func streamOnce(b *testing.B, p *Provider) int {
	s, err := p.Stream(stdctx.Background(), llm.Request{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	chunks := 0
	for {
		_, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return chunks
		}
		if err != nil {
			b.Fatal(err)
		}
		chunks++
	}
}

// recordedAnswer is the recorded text stream with its middle text event
// repeated to n text chunks, as a model streams a long answer.
func recordedAnswer(b *testing.B, n int) [][]byte {
	raw, err := os.ReadFile("testdata/text.sse")
	if err != nil {
		b.Fatal(err)
	}
	var text string
	var head, tail []string
	for _, ev := range strings.Split(strings.TrimSpace(string(raw)), "\n\n") {
		switch {
		case text == "" && strings.Contains(ev, `"content":"Hello"`):
			text = ev
		case text == "":
			head = append(head, ev)
		case strings.Contains(ev, `"content":`):
		default:
			tail = append(tail, ev)
		}
	}
	var out [][]byte
	for _, ev := range head {
		out = append(out, []byte(ev+"\n\n"))
	}
	for range n {
		out = append(out, []byte(text+"\n\n"))
	}
	for _, ev := range tail {
		out = append(out, []byte(ev+"\n\n"))
	}
	return out
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
