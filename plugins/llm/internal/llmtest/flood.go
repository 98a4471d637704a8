package llmtest

import (
	stdctx "context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

// FloodBytes is how much a Flood server sends at most: far more than any
// bound a test sets, so a client that does not stop reading is caught.
const FloodBytes = 64 << 20

// Flood starts a server that answers every request with head, then
// event(0), event(1), … until FloodBytes are written or the client goes
// away. Sent counts the bytes the server managed to write, so a test can
// prove the client abandoned the stream early.
func Flood(t testing.TB, head string, event func(i int) string) (s *httptest.Server, sent *atomic.Int64) {
	sent = &atomic.Int64{}
	s = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		f, _ := w.(http.Flusher)
		n, err := io.WriteString(w, head)
		sent.Add(int64(n))
		for i := 0; err == nil && sent.Load() < FloodBytes; i++ {
			n, err = io.WriteString(w, event(i))
			sent.Add(int64(n))
			if i%64 == 0 && f != nil {
				f.Flush()
			}
		}
	}))
	t.Cleanup(s.Close)
	return s, sent
}

// Bounded streams req through a model service holding p, as the agent loop
// does, and assembles what comes out. heap is how much the live heap grew
// from before the call to after it, with the assembled message still held.
func Bounded(t testing.TB, p llm.Provider, req llm.Request) (a *llm.Assembler, heap int64, err error) {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	t.Cleanup(func() { root.Dispose(stdctx.Background()) })
	svc := llm.NewService()
	if err := svc.Register(root, "p", p); err != nil {
		t.Fatal(err)
	}
	req.Provider = "p"
	before := liveHeap()
	a = &llm.Assembler{}
	s, err := svc.Stream(stdctx.Background(), req)
	if err != nil {
		return nil, 0, err
	}
	defer s.Close()
	for {
		c, rerr := s.Recv()
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			err = rerr
			break
		}
		a.Add(c)
	}
	heap = int64(liveHeap()) - int64(before)
	runtime.KeepAlive(a)
	return a, heap, err
}

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}
