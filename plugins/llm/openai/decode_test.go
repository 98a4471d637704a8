package openai

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/internal/sse"
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
