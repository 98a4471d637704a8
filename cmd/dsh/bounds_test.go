package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// floodBytes is how much the flooding server sends at most: far over the
// limits the tests configure.
const floodBytes = 64 << 20

// floodServer answers the first request with head and then event(i)
// repeated until floodBytes are sent or dsh hangs up, and every later
// request with the recorded text.sse. It keeps the request bodies.
func floodServer(t *testing.T, head string, event func(i int) string) (srv *httptest.Server, sent *atomic.Int64, bodies func() [][]byte) {
	var mu sync.Mutex
	var got [][]byte
	sent = &atomic.Int64{}
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		n := len(got)
		got = append(got, body)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n > 0 {
			data, _ := os.ReadFile("../../plugins/llm/openai/testdata/text.sse")
			w.Write(data)
			return
		}
		f := w.(http.Flusher)
		k, err := io.WriteString(w, head)
		sent.Add(int64(k))
		for i := 0; err == nil && sent.Load() < floodBytes; i++ {
			k, err = io.WriteString(w, event(i))
			sent.Add(int64(k))
			if i%64 == 0 {
				f.Flush()
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv, sent, func() [][]byte { mu.Lock(); defer mu.Unlock(); return append([][]byte(nil), got...) }
}

// runAgainst runs `dsh run -p` with an OpenAI-style provider at url and
// the given limits: block, and reports its peak memory.
func runAgainst(t *testing.T, url, limits string) (o outcome, maxRSS int64) {
	t.Helper()
	cfg := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(cfg, []byte(`plugins:
  - use: llm.openai
    config: {base_url: `+url+`, api_key_env: LOCAL_KEY, model: m}
  - use: tools.clock
limits: `+limits+`
agents:
  - id: main
    provider: openai
log:
  level: warn
`), 0o644)
	cmd := exec.Command(dshBin, "run", "--config", cfg, "-p", "go")
	cmd.Env = append(os.Environ(), "LOCAL_KEY=sk-local", "DSH_CONFIG=")
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		o.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	o.stdout, o.stderr = out.String(), errb.String()
	return o, cmd.ProcessState.SysUsage().(*syscall.Rusage).Maxrss * 1024
}

// One tool call with far more arguments than max_tool_argument_bytes: dsh
// stops reading, does not run the call, tells the model why in a short
// error result, and neither echoes nor sends back the arguments.
func TestHugeToolArgumentsAreRefusedNotEchoed(t *testing.T) {
	piece := strings.Repeat("x", 1000)
	srv, sent, bodies := floodServer(t,
		`data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"clock","arguments":"{\"x\":\""}}]}}]}`+"\n\n",
		func(int) string {
			return `data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + piece + `"}}]}}]}` + "\n\n"
		})
	o, rss := runAgainst(t, srv.URL, "{max_tool_argument_bytes: 65536}")
	t.Logf("server wrote %d bytes; dsh peaked at %d MiB RSS; stderr %d bytes", sent.Load(), rss>>20, len(o.stderr))
	if o.code != 0 || o.stdout != "Hello, world\n" {
		t.Fatalf("exit %d, stdout %q, stderr %.500q", o.code, o.stdout, o.stderr)
	}
	if len(o.stderr) > 4096 || !strings.Contains(o.stderr, "max_tool_argument_bytes") {
		t.Fatalf("stderr must say why the call did not run, briefly: %d bytes: %.500q", len(o.stderr), o.stderr)
	}
	if n := sent.Load(); n > 16<<20 {
		t.Fatalf("the server wrote %d bytes: dsh read on past the limit", n)
	}
	b := bodies()
	if len(b) != 2 || len(b[1]) > 64<<10 || !strings.Contains(string(b[1]), "max_tool_argument_bytes") {
		t.Fatalf("the second request must carry the short refusal, not the arguments: %d requests, last %d bytes", len(b), len(b[len(b)-1]))
	}
	if rss > 256<<20 {
		t.Fatalf("dsh peaked at %d MiB for limits of 64 KiB", rss>>20)
	}
}

// An answer far over max_text_bytes is cut there: dsh stops reading and
// ends as an answer cut at the output limit (exit 4).
func TestHugeAnswerIsCut(t *testing.T) {
	piece := strings.Repeat("y", 1000)
	srv, sent, _ := floodServer(t, "", func(int) string {
		return `data: {"choices":[{"index":0,"delta":{"content":"` + piece + `"}}]}` + "\n\n"
	})
	o, rss := runAgainst(t, srv.URL, "{max_text_bytes: 65536}")
	t.Logf("server wrote %d bytes; dsh peaked at %d MiB RSS", sent.Load(), rss>>20)
	if o.code != exitMaxTokens || len(o.stdout) > 65536+1 || !strings.HasPrefix(o.stdout, "yyyy") {
		t.Fatalf("exit %d, stdout %d bytes, stderr %.500q", o.code, len(o.stdout), o.stderr)
	}
	if n := sent.Load(); n > 16<<20 {
		t.Fatalf("the server wrote %d bytes: dsh read on past the limit", n)
	}
	if rss > 256<<20 {
		t.Fatalf("dsh peaked at %d MiB for limits of 64 KiB", rss>>20)
	}
}
