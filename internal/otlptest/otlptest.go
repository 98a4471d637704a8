// Package otlptest runs a real OpenTelemetry Collector for tests: the
// upstream OTLP receiver (gRPC and HTTP) feeding the contrib file
// exporter, built from the nested module ./otelcol (a module of its own,
// as the collector needs newer OpenTelemetry modules than dsh pins). A
// test starts one with Start, points dsh's OTLP exporter at it, and reads
// what arrived from the exporter's OTLP JSON files, decoded with the
// protocol's generated types (go.opentelemetry.io/proto/otlp).
//
// The binary is built once per machine and source (see Binary); .ci/run
// builds it early, in parallel with the rest of CI's set-up.
package otlptest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/syncbuf"
)

// Collector is a running collector process.
type Collector struct {
	grpcAddr string
	httpAddr string
	traces   string // the file exporter's output for traces
	metrics  string // and for metrics
	stderr   *syncbuf.Buffer
}

// flushEvery is how often the file exporter writes what it holds: a test
// waits about this long past the export before it can read a span.
const flushEvery = 50 * time.Millisecond

const config = `receivers:
  otlp:
    protocols:
      grpc: {endpoint: %q}
      http: {endpoint: %q}
exporters:
  file/traces: {path: %q, flush_interval: %s}
  file/metrics: {path: %q, flush_interval: %s}
service:
  pipelines:
    traces: {receivers: [otlp], exporters: [file/traces]}
    metrics: {receivers: [otlp], exporters: [file/metrics]}
`

// Start starts a collector on loopback ports; it stops when the test ends.
func Start(t testing.TB) *Collector {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	// The ports are chosen here and bound by the collector, so another
	// process may take one in between: then try again on others.
	var lastErr error
	for range 5 {
		c, stop, err := start(bin, dir)
		if err == nil {
			t.Cleanup(func() {
				stop()
				if t.Failed() && c.stderr.Len() > 0 {
					t.Logf("the collector's log:\n%s", c.stderr.String())
				}
			})
			return c
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	t.Fatalf("starting the collector: %v", lastErr)
	return nil
}

// start runs the collector with its files in dir and returns it once it
// listens, with the function that stops it.
func start(bin, dir string) (*Collector, func(), error) {
	ports, err := freePorts(2)
	if err != nil {
		return nil, nil, err
	}
	c := &Collector{
		grpcAddr: ports[0], httpAddr: ports[1],
		traces: filepath.Join(dir, "traces.jsonl"), metrics: filepath.Join(dir, "metrics.jsonl"),
		stderr: &syncbuf.Buffer{},
	}
	cfg := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, config, c.grpcAddr, c.httpAddr, c.traces, flushEvery, c.metrics, flushEvery), 0o644); err != nil {
		return nil, nil, err
	}
	cmd := exec.Command(bin, "--config", cfg)
	cmd.Stdout = c.stderr
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	// Ready is when both receivers accept connections; the exporters start
	// before the receivers, so nothing sent after that is lost.
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range []string{c.grpcAddr, c.httpAddr} {
		for {
			conn, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				conn.Close()
				break
			}
			select {
			case err := <-exited:
				return nil, nil, fmt.Errorf("the collector exited (%v):\n%s", err, c.stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				stop()
				return nil, nil, fmt.Errorf("the collector does not listen on %s after 30s:\n%s", addr, c.stderr.String())
			}
		}
	}
	return c, stop, nil
}

func freePorts(n int) ([]string, error) {
	var out []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out, nil
}

// GRPCEndpoint is host:port for OTLP/gRPC.
func (c *Collector) GRPCEndpoint() string { return c.grpcAddr }

// HTTPEndpoint is the base URL for OTLP/HTTP (the exporter adds /v1/traces).
func (c *Collector) HTTPEndpoint() string { return "http://" + c.httpAddr }

// Log is what the collector wrote to stdout and stderr so far.
func (c *Collector) Log() string { return c.stderr.String() }
