package execplugin_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/tools"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkPythonToolCall is the figure of issue 21 for Python: one call
// of examples/python-tool's file_stats (one small file) as a ratio to a
// bare gRPC unary (Describe) on the same connection to the same Python
// process. "tool-call" goes through the host's whole tool pipeline
// (validate, tools/approve, tools/execute, ExecuteTool); "execute-tool-rpc"
// is the RPC alone, to tell the host's share from Python's. Each reports
// its p50 and the CPU time the host and the plugin spent per call.
//
// "tool-call" needs the host side of binary tools (branch bintools).
func BenchmarkPythonToolCall(b *testing.B) {
	requirePython(b)
	ws := b.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("one two\nthree\n"), 0o600); err != nil {
		b.Fatal(err)
	}
	yaml := "plugins:\n  - use: llm.scripted\n" + pythonEntry(b, "stats", "../../examples/python-tool/dsh_file_stats.py", "{}") +
		"agents:\n  - id: main\n    provider: scripted\n    workspace: " + ws + "\n"
	cfg, err := config.Parse("bench.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(stdctx.Background()) })
	p := binary(h, "stats")
	rpc, pid := execplugin.RPC(p), execplugin.PID(p)
	if rpc == nil || pid == 0 {
		b.Fatal("the Python plugin is not running")
	}
	a, _ := h.Agent("main")
	at := a.Context()
	args := `{"pattern": "a.txt"}`
	measure := func(b *testing.B, op func() error) {
		b.ReportAllocs()
		lat := make([]time.Duration, 0, 1<<12)
		hostCPU, pluginCPU := processCPU(0), processCPU(pid)
		for b.Loop() {
			t0 := time.Now()
			if err := op(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		if hostCPU >= 0 && pluginCPU >= 0 {
			b.ReportMetric(float64((processCPU(0)-hostCPU).Microseconds())/float64(len(lat)), "host-cpu-µs/op")
			b.ReportMetric(float64((processCPU(pid)-pluginCPU).Microseconds())/float64(len(lat)), "plugin-cpu-µs/op")
		}
	}
	b.Run("tool-call", func(b *testing.B) {
		svc, err := tools.Key.Get(at)
		if err != nil {
			b.Fatal(err)
		}
		measure(b, func() error {
			r, err := svc.Execute(stdctx.Background(), at, tools.Call{AgentID: "main", ID: "c1", Name: "file_stats",
				Arguments: json.RawMessage(args), Workspace: ws})
			if err == nil && r.IsError {
				b.Fatalf("file_stats failed: %s", r.Content)
			}
			return err
		})
	})
	b.Run("execute-tool-rpc", func(b *testing.B) {
		inv := &pluginv1.ToolInvocation{AgentId: "main", Workspace: ws,
			Call: &pluginv1.ToolCall{Id: "c1", Name: "file_stats", Arguments: args}}
		measure(b, func() error {
			out, err := rpc.ExecuteTool(stdctx.Background(), inv)
			if err == nil && (out.Error != nil || out.Result.GetIsError()) {
				b.Fatalf("file_stats failed: %v %v", out.Error, out.Result)
			}
			return err
		})
	})
	b.Run("bare-unary", func(b *testing.B) {
		measure(b, func() error {
			_, err := rpc.Describe(stdctx.Background(), &pluginv1.DescribeRequest{})
			return err
		})
	})
}
