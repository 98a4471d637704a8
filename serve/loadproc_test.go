package serve_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
)

// The load test in two processes. One process holds at most 20,000 open
// files here, and 10,000 subscribers are 20,000 sockets when client and
// server share a process; measuring `dsh serve` apart from its clients is
// also what issue 38 asks. -load.dsh names a built dsh binary: TestLoad
// then starts `dsh serve` with the load config and measures its RSS and
// CPU from /proc, and the floor is a bare SSE server in a process of its
// own (this test binary, started with loadFloorEnv set).
var loadDsh = flag.String("load.dsh", "", "TestLoad: a dsh binary to run the server as a process of its own (go build -o /tmp/dsh ./cmd/dsh)")

// loadStore is the session store of the -load.dsh server. session.jsonl
// holds one open file per open session (the flock on its lock file, which
// lives as long as the descriptor), so with one socket per subscriber an
// open session costs the server two descriptors; session.nats holds the
// lease of a session as a key in a bucket, none, so a session with its
// subscriber costs one. 10,000 of them fit the 20,000 a process may open
// only that way.
var loadStore = flag.String("load.store", "jsonl", "TestLoad -load.dsh: the session store, jsonl or nats (a nats-server process of its own)")

// loadFloorEnv, set, makes the test binary a bare SSE server (TestMain).
const loadFloorEnv = "DSH_LOAD_FLOOR_SERVER"

// loadProc is a server process the load test talks to over loopback.
type loadProc struct {
	base string
	cmd  *exec.Cmd
	// emfile counts the lines of its log that say it ran out of open
	// files (an accept retried): a run too big for the machine's limit.
	emfile atomic.Int64
	// store is the session store's own process (-load.store nats), nil
	// when the server keeps its sessions itself.
	store *loadProc
}

// startLoadProc starts cmd, which prints "listening on http://<addr>" to
// stderr, and waits for that line.
func startLoadProc(tb testing.TB, cmd *exec.Cmd) *loadProc {
	tb.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	p := &loadProc{cmd: cmd}
	addr := make(chan string, 1)
	var lines []string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "too many open files") {
				p.emfile.Add(1)
			}
			if _, rest, ok := strings.Cut(sc.Text(), "listening on http://"); ok {
				addr <- strings.Fields(rest)[0]
			} else if len(lines) < 20 {
				lines = append(lines, sc.Text())
			}
		}
	}()
	select {
	case a := <-addr:
		p.base = "http://" + a
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		tb.Fatalf("%s: no listening line within 60s; it said %q", cmd.Path, lines)
	}
	return p
}

// stop ends the process with SIGTERM (a graceful shutdown), then kills it
// after 30s.
func (p *loadProc) stop() error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		return errors.Join(errors.New("no exit within 30s of SIGTERM"), <-done)
	}
}

// rss is the process's resident set.
func (p *loadProc) rss() uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// cpu is the process's user and system CPU time so far.
func (p *loadProc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	_, rest, _ := strings.Cut(string(b), ") ")
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	// Clock ticks: 100 a second on Linux.
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// fds is how many files the process holds open.
func (p *loadProc) fds() int {
	es, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	return len(es)
}

// threads is the process's thread count.
func (p *loadProc) threads() int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// startLoadDsh runs `dsh serve` with the load config and the session
// store -load.store names.
func startLoadDsh(tb testing.TB, bin string, model []byte, token string) *loadProc {
	tb.Helper()
	dir := tb.TempDir()
	cfg := filepath.Join(dir, "load.yaml")
	var yaml []byte
	var store *loadProc
	switch *loadStore {
	case "jsonl":
		yaml = fmt.Appendf(nil, loadYAML, model, filepath.Join(dir, "sessions"))
	case "nats":
		// A process of its own: the server's descriptors (one socket for
		// dsh serve, its file store's few) are counted against neither end.
		store = startLoadNATS(tb)
		yaml = fmt.Appendf(nil, loadNATSYAML, model, store.base)
	default:
		tb.Fatalf("-load.store %q: want jsonl or nats", *loadStore)
	}
	if err := os.WriteFile(cfg, yaml, 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfg, "--listen", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "DSH_CONFIG=", "DSH_SERVE_TOKEN="+token)
	cmd.Dir = dir
	p := startLoadProc(tb, cmd)
	p.store = store
	return p
}

// startLoadNATS runs a JetStream nats-server, a single server of its own,
// until the test ends, and returns its URL.
func startLoadNATS(tb testing.TB) *loadProc {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := tb.TempDir()
	cmd := exec.Command(natstest.Binary(tb), "-js", "-sd", dir, "-a", "127.0.0.1", "-p", strconv.Itoa(port))
	logf, err := os.Create(filepath.Join(dir, "nats.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return &loadProc{base: "nats://" + addr, cmd: cmd}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nats-server accepts no client at %s after 30s: %v", addr, err)
		}
	}
}

// loadNATSYAML is loadYAML with session.nats for the store. Each held
// session renews its lease every third of lease_ttl; 10 minutes keeps
// 10,000 sessions' renewals at 50 a second, a background the figures
// should not be about.
const loadNATSYAML = `plugins:
  - use: llm.scripted
    config: %s
  - use: session.nats
    config: {url: %q, stream: DSH_LOAD, lease_ttl: 10m}
agents:
  - id: main
    provider: scripted
`

// loadFloorProcMemory is the floor of an open session's RSS when the
// server is a process of its own: n subscribers on a bare SSE server in
// another process, its RSS growth per subscriber.
func loadFloorProcMemory(tb testing.TB, n int) float64 {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), loadFloorEnv+"=1")
	p := startLoadProc(tb, cmd)
	defer p.stop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16, DisableCompression: true}}
	defer client.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	before := p.rss()
	stop := loadAttachFloor(tb, p.base, client, n)
	time.Sleep(500 * time.Millisecond)
	after := p.rss()
	stop()
	return float64(int64(after)-int64(before)) / float64(n)
}

// loadFloorServe is the floor server's process: a bare SSE stream on
// every path, until SIGTERM.
func loadFloorServe() {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		data, _ := json.Marshal(map[string]any{"session": "floor", "last_seq": 0})
		fmt.Fprintf(w, "event: ready\ndata: %s\n\n", data)
		if rc.Flush() != nil {
			return
		}
		<-r.Context().Done()
	}), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "floor: listening on http://%s\n", l.Addr())
	go hs.Serve(l)
	sig := make(chan os.Signal, 1)
	signalNotify(sig)
	<-sig
	hs.Close()
	os.Exit(0)
}
