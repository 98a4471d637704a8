package openai

import (
	"bytes"
	stdctx "context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/internal/httpx"
	"github.com/dsh-go/dsh/plugins/llm/internal/sse"
	"github.com/dsh-go/dsh/services/llm"
)

func newTestStream(data []byte) *stream {
	return &stream{provider: "test", body: io.NopCloser(bytes.NewReader(data)), events: sse.NewReader(bytes.NewReader(data))}
}

// FuzzStream feeds arbitrary bytes to the decoder: it may fail, never panic
// or loop.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"text.sse", "parallel_tools.sse", "deepseek_reasoning_tool.sse", "vllm_usage.sse", "bad_json.sse"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := newTestStream(data)
		for range 100000 {
			if _, err := s.Recv(); err != nil {
				return
			}
		}
		t.Fatal("the decoder never ended")
	})
}

// BenchmarkDecodeChunk decodes a recorded stream, reporting the cost per
// chunk the agent loop receives.
func BenchmarkDecodeChunk(b *testing.B) {
	one, err := os.ReadFile("testdata/deepseek_reasoning_tool.sse")
	if err != nil {
		b.Fatal(err)
	}
	// A long answer: the recorded middle event repeated, as a model
	// streams text.
	lines := strings.Split(string(one), "\n\n")
	body := strings.Join(lines[:2], "\n\n") + "\n\n" + strings.Repeat(lines[1]+"\n\n", 200) + strings.Join(lines[2:], "\n\n")
	data := []byte(body)
	b.ReportAllocs()
	chunks := 0
	for b.Loop() {
		s := newTestStream(data)
		for {
			_, err := s.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			chunks++
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(chunks), "ns/chunk")
	b.ReportMetric(float64(testing.AllocsPerRun(1, func() {
		s := newTestStream(data)
		for {
			if _, err := s.Recv(); err != nil {
				break
			}
		}
	}))/float64(chunks/b.N), "allocs/chunk")
}

// BenchmarkFirstToken measures how long the first chunk takes from the
// server's write on the socket to the stream's Recv returning it: the time
// before the agent loop can append it to the session.
func BenchmarkFirstToken(b *testing.B) {
	written := make(chan time.Time, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		time.Sleep(time.Millisecond) // the model "thinks"; the client waits on the socket
		written <- time.Now()
		io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	p, err := NewOpenAI(Config{Common: httpx.Common{BaseURL: srv.URL, Model: "m"}}, func(string) string { return "" })
	if err != nil {
		b.Fatal(err)
	}
	var total time.Duration
	for b.Loop() {
		s, err := p.Stream(stdctx.Background(), llm.Request{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			b.Fatal(err)
		}
		total += time.Since(<-written)
		s.Close()
	}
	b.ReportMetric(float64(total.Microseconds())/float64(b.N), "µs-to-first-chunk")
}
