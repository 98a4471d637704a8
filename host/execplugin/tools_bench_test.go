package execplugin_test

import (
	stdctx "context"
	"encoding/json"
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

// BenchmarkPluginTool compares a call of a binary's tool through the whole
// pipeline (tools.Service.Execute: validation, tools/approve,
// tools/execute, ExecuteTool) with bare unary calls on the same
// connection: ExecuteTool of the same call, and Describe. Each reports its
// p50 and the CPU both processes spent per call.
func BenchmarkPluginTool(b *testing.B) {
	cfg, err := config.Parse("bench.yaml", []byte(toolConfig(toolPlugin(b), "{}", "", "")), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(stdctx.Background()) })
	p, _ := h.ExecPlugin("tools")
	rpc, pid := execplugin.RPC(p), execplugin.PID(p)
	if pid == 0 {
		b.Fatal("the plugin's process id is unknown")
	}
	a, _ := h.Agent("main")
	svc, _ := tools.Key.Get(a.Context())
	args := `{"text":"hello"}`
	call := tools.Call{AgentID: "main", ID: "c1", Name: "echo", Arguments: json.RawMessage(args), Workspace: "/tmp"}
	inv := &pluginv1.ToolInvocation{AgentId: "main", Workspace: "/tmp", Call: &pluginv1.ToolCall{Id: "c1", Name: "echo", Arguments: args}}
	measure := func(b *testing.B, op func() error) {
		lat := make([]time.Duration, 0, 1<<16)
		hostCPU, pluginCPU := processCPU(0), processCPU(pid)
		for b.Loop() {
			t0 := time.Now()
			if err := op(); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
		b.ReportMetric(float64((processCPU(0)-hostCPU).Microseconds())/float64(len(lat)), "host-cpu-µs/op")
		b.ReportMetric(float64((processCPU(pid)-pluginCPU).Microseconds())/float64(len(lat)), "plugin-cpu-µs/op")
	}
	b.Run("tool-call", func(b *testing.B) {
		b.ReportAllocs()
		measure(b, func() error {
			r, err := svc.Execute(stdctx.Background(), a.Context(), call)
			if err == nil && (r.IsError || r.Content != "echo: hello") {
				b.Fatalf("%+v", r)
			}
			return err
		})
	})
	b.Run("bare-execute-tool", func(b *testing.B) {
		b.ReportAllocs()
		measure(b, func() error {
			_, err := rpc.ExecuteTool(stdctx.Background(), inv)
			return err
		})
	})
	b.Run("bare-unary", func(b *testing.B) {
		b.ReportAllocs()
		measure(b, func() error {
			_, err := rpc.Describe(stdctx.Background(), &pluginv1.DescribeRequest{})
			return err
		})
	})
	// Alternating the two in one loop puts both under the same load, which
	// on a shared machine moves more between runs than between calls.
	b.Run("interleaved-ratio", func(b *testing.B) {
		var tool, bare []time.Duration
		for b.Loop() {
			t0 := time.Now()
			if _, err := svc.Execute(stdctx.Background(), a.Context(), call); err != nil {
				b.Fatal(err)
			}
			t1 := time.Now()
			if _, err := rpc.ExecuteTool(stdctx.Background(), inv); err != nil {
				b.Fatal(err)
			}
			tool, bare = append(tool, t1.Sub(t0)), append(bare, time.Since(t1))
		}
		slices.Sort(tool)
		slices.Sort(bare)
		b.ReportMetric(float64(tool[len(tool)/2])/float64(bare[len(bare)/2]), "p50-tool/bare")
	})
}
