package mcp

import (
	stdctx "context"
	"encoding/json"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/tools"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// cpuTime is this process's user and system time so far; the server's
// own time (a child process, for stdio) is not in it.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func measure(b *testing.B, op func()) {
	b.ReportAllocs()
	b.ResetTimer()
	start := cpuTime(b)
	for b.Loop() {
		op()
	}
	b.ReportMetric(float64(cpuTime(b)-start)/float64(b.N), "cpu-ns/op")
}

var benchArgs = json.RawMessage(`{"text":"hello"}`)

// BenchmarkCall compares a call of the echo tool through dsh
// (tools.Service.Execute: validation, approval, tools/execute, the
// plugin) with the same call made directly with the SDK's client, over
// the in-memory and the stdio transport.
func BenchmarkCall(b *testing.B) {
	b.Run("memory/direct", func(b *testing.B) {
		srv, _ := newTestServer()
		st, ct := mcpsdk.NewInMemoryTransports()
		ss, err := srv.Connect(stdctx.Background(), st, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer ss.Close()
		benchDirect(b, ct)
	})
	b.Run("memory/dsh", func(b *testing.B) {
		cfg, _ := memoryConfig(b)
		benchDsh(b, cfg)
	})
	b.Run("stdio/direct", func(b *testing.B) {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), serverEnv+"=1")
		benchDirect(b, &mcpsdk.CommandTransport{Command: cmd})
	})
	b.Run("stdio/dsh", func(b *testing.B) {
		benchDsh(b, stdioConfig())
	})
}

func benchDirect(b *testing.B, t mcpsdk.Transport) {
	c := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "bench", Version: "1"}, nil)
	cs, err := c.Connect(stdctx.Background(), t, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer cs.Close()
	measure(b, func() {
		r, err := cs.CallTool(stdctx.Background(), &mcpsdk.CallToolParams{Name: "echo", Arguments: benchArgs})
		if err != nil || r.IsError {
			b.Fatal(err, r)
		}
	})
}

// BenchmarkCallOfAChangingTool is BenchmarkCall/…/dsh for a tool without
// readOnlyHint, after which dsh lists the server's tools (catchup.go):
// the difference is the price of that list.
func BenchmarkCallOfAChangingTool(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		cfg, _ := memoryConfig(b)
		cfg.Approval = "allow"
		benchTool(b, cfg, "write")
	})
	b.Run("stdio", func(b *testing.B) {
		cfg := stdioConfig()
		cfg.Approval = "allow"
		benchTool(b, cfg, "write")
	})
}

func benchDsh(b *testing.B, cfg Config) { benchTool(b, cfg, "echo") }

func benchTool(b *testing.B, cfg Config, tool string) {
	root, svc := mustMount(b, cfg)
	c := tools.Call{ID: "c", Name: cfg.Name + "__" + tool, Arguments: benchArgs}
	measure(b, func() {
		r, err := svc.Execute(stdctx.Background(), root, c)
		if err != nil || r.IsError {
			b.Fatal(err, r)
		}
	})
}
