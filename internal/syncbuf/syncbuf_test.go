package syncbuf_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/internal/syncbuf"
)

// TestWritesFromManyGoroutinesAreAllKept: run with -race, the writers and
// the reader never share the bytes unguarded, and no write is lost.
func TestWritesFromManyGoroutinesAreAllKept(t *testing.T) {
	var b syncbuf.Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("x"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if b.Len() != 800 || b.String() != strings.Repeat("x", 800) {
		t.Fatalf("kept %d bytes, want 800", b.Len())
	}
}
