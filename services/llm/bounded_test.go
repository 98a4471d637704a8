package llm_test

import (
	stdctx "context"
	"errors"
	"io"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

// endless streams the same chunk forever and counts what was read of it.
type endless struct {
	chunk  llm.Chunk
	read   int
	closed bool
}

func (e *endless) Stream(stdctx.Context, llm.Request) (llm.Stream, error) { return e, nil }
func (e *endless) Recv() (llm.Chunk, error) {
	if e.closed {
		return llm.Chunk{}, errors.New("read after Close")
	}
	e.read++
	return e.chunk, nil
}
func (e *endless) Close() error { e.closed = true; return nil }

func boundedService(t testing.TB, p llm.Provider) *llm.Service {
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	t.Cleanup(func() { root.Dispose(stdctx.Background()) })
	svc := llm.NewService()
	if err := svc.Register(root, "p", p); err != nil {
		t.Fatal(err)
	}
	return svc
}

// A text cut at the limit never splits a character, and the provider is
// closed, not read on.
func TestTextIsCutOnACharacterAndTheProviderClosed(t *testing.T) {
	p := &endless{chunk: llm.Chunk{Kind: llm.ChunkText, Text: "é€"}} // 2 + 3 bytes
	s, err := boundedService(t, p).Stream(stdctx.Background(), llm.Request{Provider: "p", Limits: llm.Limits{MaxTextBytes: 11}})
	if err != nil {
		t.Fatal(err)
	}
	var a llm.Assembler
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Add(c)
	}
	finish, why := a.Finish()
	if got := a.Message().Content; got != "é€é€" || finish != llm.FinishMaxTokens || !strings.Contains(why, "max_text_bytes") {
		t.Fatalf("content %q (%d bytes), finish %q %q", got, len(got), finish, why)
	}
	if !p.closed || p.read != 3 {
		t.Fatalf("the provider was read %d times, closed %v; want 3 reads and closed", p.read, p.closed)
	}
}

// BenchmarkBoundedStream is the cost the limits add to each chunk read
// through the service.
func BenchmarkBoundedStream(b *testing.B) {
	p := &endless{chunk: llm.Chunk{Kind: llm.ChunkText, Text: "token"}}
	s, err := boundedService(b, p).Stream(stdctx.Background(), llm.Request{Provider: "p", Limits: llm.Limits{MaxTextBytes: 1 << 62}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Recv(); err != nil {
			b.Fatal(err)
		}
	}
}
