package execplugin_test

import (
	"bytes"
	stdctx "context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/hashicorp/go-hclog"
)

func benchHost(b *testing.B) (*host.Host, agentcontroller.Admission, *dshctx.Context) {
	bin, _ := binaries(&testing.T{})
	cfg, err := config.Parse("bench.yaml", []byte(execConfig(bin, "{}", "")), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(stdctx.Background()) })
	a, _ := h.Agent("main")
	return h, agentcontroller.Admission{Agent: a, Message: llm.Message{Role: llm.RoleUser, Content: "hi"}, Mode: agentcontroller.Followup}, a.Context()
}

// BenchmarkPluginCall dispatches the admission waterfall through one plugin
// listener that calls next, and a bare gRPC unary call (Describe) on the
// same connection for comparison.
func BenchmarkPluginCall(b *testing.B) {
	h, adm, at := benchHost(b)
	rpc := execplugin.RPC(binary(h, "guard"))
	b.Run("waterfall-with-next", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			t0 := time.Now()
			d, err := agentcontroller.EventAdmission.Dispatch(stdctx.Background(), at, adm)
			if err != nil || d.Kind != agentcontroller.DecisionAdmit {
				b.Fatal(d, err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})
	b.Run("bare-unary", func(b *testing.B) {
		lat := make([]time.Duration, 0, 1<<16)
		for b.Loop() {
			t0 := time.Now()
			if _, err := rpc.Describe(stdctx.Background(), &pluginv1.DescribeRequest{}); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		reportP50(b, lat)
	})
}

func reportP50(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
}

// BenchmarkPluginConcurrent runs 1,000 calls at a time through one plugin.
// Besides the rate it reports the CPU time both processes spent per call,
// which this shared machine's noise disturbs far less than wall time.
func BenchmarkPluginConcurrent(b *testing.B) {
	h, adm, at := benchHost(b)
	pid := execplugin.PID(binary(h, "guard"))
	if pid == 0 {
		// processCPU(0) reads this process: the plugin's figure would
		// silently repeat the host's.
		b.Fatal("the plugin's process id is unknown")
	}
	const inFlight = 1000
	calls := 0
	hostCPU, pluginCPU := processCPU(0), processCPU(pid)
	start := time.Now()
	for b.Loop() {
		var wg sync.WaitGroup
		for range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := agentcontroller.EventAdmission.Dispatch(stdctx.Background(), at, adm); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		calls += inFlight
	}
	b.ReportMetric(float64(calls)/time.Since(start).Seconds(), "calls/s")
	if hostCPU >= 0 && pluginCPU >= 0 {
		b.ReportMetric(float64((processCPU(0)-hostCPU).Microseconds())/float64(calls), "host-cpu-µs/call")
		b.ReportMetric(float64((processCPU(pid)-pluginCPU).Microseconds())/float64(calls), "plugin-cpu-µs/call")
	}
}

// processCPU reads the user and system time a process has used so far
// (pid 0: this one) from /proc; -1 where there is no /proc.
func processCPU(pid int) time.Duration {
	path := "/proc/self/stat"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/stat", pid)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	// The command name may hold spaces; the fields after it do not.
	fields := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, _ := strconv.Atoi(fields[11])
	stime, _ := strconv.Atoi(fields[12])
	const ticksPerSecond = 100 // USER_HZ, fixed on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// BenchmarkPluginStart measures a plugin process from exec to ready: the
// handshake, Describe and Configure, and its listener registered.
func BenchmarkPluginStart(b *testing.B) {
	bin, _ := binaries(&testing.T{})
	cfg, err := config.Parse("bench.yaml", []byte(execConfig(bin, "{}", "")), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	base, err := config.Parse("bench.yaml", []byte("plugins:\n  - use: llm.scripted\nagents:\n  - id: main\n    provider: scripted\n"), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	var with, without time.Duration
	for b.Loop() {
		for _, c := range []*config.Config{cfg, base} {
			t0 := time.Now()
			h, err := hosttest.Start(c, host.Options{Logger: hclog.NewNullLogger()})
			if err != nil {
				b.Fatal(err)
			}
			if c == cfg {
				with += time.Since(t0)
			} else {
				without += time.Since(t0)
			}
			h.Close(stdctx.Background())
		}
	}
	b.ReportMetric(float64((with-without).Microseconds())/float64(b.N)/1000, "ms-exec-to-ready")
}
