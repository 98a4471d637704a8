package faults

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// modelFault is one way a model server fails, and the reason dsh must
// report for it.
type modelFault struct {
	name   string
	reason string
	serve  func(w http.ResponseWriter, r *http.Request, hold <-chan struct{})
}

const chunk = `data: {"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"partial "}}]}` + "\n\n"

func sseHeaders(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
}

// stall holds the request until the client gives up or the test ends.
func stall(r *http.Request, hold <-chan struct{}) {
	select {
	case <-r.Context().Done():
	case <-hold:
	}
}

var modelFaults = []modelFault{
	{"stalls after the headers", "llm/stream-idle-timeout", func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		sseHeaders(w)
		stall(r, hold)
	}},
	{"stalls mid-stream", "llm/stream-idle-timeout", func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		sseHeaders(w)
		fmt.Fprint(w, chunk)
		w.(http.Flusher).Flush()
		stall(r, hold)
	}},
	{"cuts the stream", "llm/stream-truncated", func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		sseHeaders(w)
		fmt.Fprint(w, chunk)
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}},
	{"sends a malformed chunk", "llm/bad-chunk", func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		sseHeaders(w)
		fmt.Fprint(w, chunk+"data: {\"choices\": [{\"delta\": {\"content\": 17\n\n")
	}},
	{"answers 429", "llm/rate-limited", func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		w.Header().Set("Retry-After", "0")
		http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
	}},
	{"answers 503", "llm/server-error", func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
	}},
	{"never sends the headers", "llm/timeout", func(w http.ResponseWriter, r *http.Request, hold <-chan struct{}) {
		stall(r, hold)
	}},
}

// modelYAML points agent main at the test's model server, with short
// timeouts so that each fault ends in seconds.
const modelYAML = `plugins:
  - use: llm.openai
    config:
      base_url: %s
      api_key_env: none
      model: fault-test
      timeout: 1s
      idle_timeout: 500ms
      retries: 1
      retry_backoff: 10ms
agents:
  - id: main
    provider: openai
log: {level: warn}
`

// TestModelServerFaults points `dsh run -p` at a model server that fails in
// each way: dsh returns (nothing hangs), exits 1 as documented for a failed
// turn, and says what failed with the provider's stable reason.
func TestModelServerFaults(t *testing.T) {
	b := binaries(t)
	for _, f := range modelFaults {
		t.Run(strings.ReplaceAll(f.name, " ", "-"), func(t *testing.T) {
			hold := make(chan struct{})
			var once sync.Once
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f.serve(w, r, hold) }))
			t.Cleanup(func() {
				once.Do(func() { close(hold) })
				srv.CloseClientConnections()
				srv.Close()
			})
			work := t.TempDir()
			cfg := writeFile(t, work, "model.yaml", fmt.Sprintf(modelYAML, srv.URL+"/v1"))
			o := &outcome{fault: "model server " + f.name}
			defer record(o)
			for range 2 * scale() {
				o.tries++
				start := time.Now()
				r := startDsh(t, b, work, cfg, "", "-p", "hello")
				code := r.wait(t)
				o.recover = append(o.recover, time.Since(start))
				stderr := r.stderr.String()
				if code != 1 || !strings.Contains(stderr, f.reason) || !strings.Contains(stderr, "openai") {
					o.lost++
					t.Fatalf("exit %d, want 1 and an error naming the provider (openai) with reason %s\nstderr: %s", code, f.reason, stderr)
				}
				o.refuse(f.reason)
			}
		})
	}
}
