// Package llmtest holds what the model providers' tests share: a local
// server that replays recorded streams byte for byte, and a helper that
// drains a stream into an assembler.
package llmtest

import (
	stdctx "context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/dsh-go/dsh/services/llm"
)

// Answer is one response of the replay server: a recorded stream file, or
// a status with headers and a body.
type Answer struct {
	File   string
	Status int
	Header map[string]string
	Body   string
	// Stall sends the status and the Body (not a File) and then holds the
	// connection open without another byte until the client goes away: a
	// server that hangs after its headers or mid-stream.
	Stall bool
}

// Replay answers each request with the next Answer (the last one repeats)
// and keeps what it was sent.
type Replay struct {
	dir      string
	mu       sync.Mutex
	answers  []Answer
	requests [][]byte
	headers  []http.Header
	// gone releases stalled answers at cleanup, before the server closes,
	// so a test that fails with a stream open does not hang.
	gone chan struct{}
}

// Serve starts a replay server over the files in dir, closed at cleanup.
func Serve(t testing.TB, dir string, answers ...Answer) (*httptest.Server, *Replay) {
	r := &Replay{dir: dir, answers: answers, gone: make(chan struct{})}
	s := httptest.NewServer(r)
	t.Cleanup(s.Close)
	t.Cleanup(func() { close(r.gone) })
	return s, r
}

// Requests returns the bodies received so far.
func (r *Replay) Requests() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.requests...)
}

// Headers returns the headers received so far.
func (r *Replay) Headers() []http.Header {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]http.Header(nil), r.headers...)
}

func (r *Replay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.requests = append(r.requests, body)
	r.headers = append(r.headers, req.Header.Clone())
	a := r.answers[0]
	if len(r.answers) > 1 {
		r.answers = r.answers[1:]
	}
	r.mu.Unlock()
	for k, v := range a.Header {
		w.Header().Set(k, v)
	}
	if a.Stall {
		status := a.Status
		if status == 0 {
			status = http.StatusOK
			w.Header().Set("Content-Type", "text/event-stream")
		}
		w.WriteHeader(status)
		io.WriteString(w, a.Body)
		w.(http.Flusher).Flush()
		select {
		case <-req.Context().Done():
		case <-r.gone:
		}
		return
	}
	if a.File == "" {
		w.WriteHeader(a.Status)
		io.WriteString(w, a.Body)
		return
	}
	data, err := os.ReadFile(filepath.Join(r.dir, a.File))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.Write(data)
}

// Collect drains one stream of p into an assembler and the chunk list; the
// error is the stream's, if it failed.
func Collect(p llm.Provider, req llm.Request) (*llm.Assembler, []llm.Chunk, error) {
	s, err := p.Stream(stdctx.Background(), req)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	var a llm.Assembler
	var chunks []llm.Chunk
	for {
		c, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return &a, chunks, nil
		}
		if err != nil {
			return &a, chunks, err
		}
		a.Add(c)
		chunks = append(chunks, c)
	}
}

// UpdateGolden names the environment variable that makes Golden write the
// golden file instead of comparing with it: DSH_UPDATE_GOLDEN=1 go test.
const UpdateGolden = "DSH_UPDATE_GOLDEN"

// Golden compares got with the file at path byte for byte, or writes it
// when UpdateGolden is set. Request bodies are compared as bytes because a
// provider's text-only request must not change at all when it learns to
// send more.
func Golden(t testing.TB, path string, got []byte) {
	t.Helper()
	if os.Getenv(UpdateGolden) != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("golden file: %v (write it with %s=1)", err, UpdateGolden)
	}
	if string(want) != string(got) {
		t.Fatalf("request body differs from %s:\n got %s\nwant %s", path, got, want)
	}
}
