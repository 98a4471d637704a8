package anthropic

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/dsh-go/dsh/plugins/llm/internal/sse"
)

// FuzzStream feeds arbitrary bytes to the decoder: it may fail, never panic
// or loop.
func FuzzStream(f *testing.F) {
	for _, name := range []string{"thinking_tool.sse", "text.sse", "overloaded.sse", "cut.sse"} {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s := &stream{provider: "fuzz", body: io.NopCloser(bytes.NewReader(nil)), events: sse.NewReader(bytes.NewReader(data)), tools: map[int]int{}}
		for range 100000 {
			if _, err := s.Recv(); err != nil {
				return
			}
		}
		t.Fatal("the decoder never ended")
	})
}
