package host_test

import (
	stdctx "context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkMTLSWarmUpAB starts the test plugin from exec to ready,
// alternating starts with the P-521 warm-up on and off, and reports each
// arm's median wall time and mean CPU time (host and plugin).
func BenchmarkMTLSWarmUpAB(b *testing.B) {
	bin, _ := binaries(&testing.T{})
	on, err := host.Parse("on.yaml", []byte(execConfig(bin, "{}", "")), host.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	off, err := host.Parse("off.yaml", []byte(execConfig(bin, "{}", "    env: {DSH_MTLSWARM_OFF: \"1\"}\n")), host.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	walls := map[string][]time.Duration{}
	cpu := map[string]time.Duration{}
	for b.Loop() {
		for _, arm := range []struct {
			name string
			cfg  *host.Config
		}{{"on", on}, {"off", off}} {
			c0 := rusage(b, syscall.RUSAGE_SELF) + rusage(b, syscall.RUSAGE_CHILDREN)
			t0 := time.Now()
			h, err := host.Start(arm.cfg, host.Options{Logger: hclog.NewNullLogger()})
			if err != nil {
				b.Fatal(err)
			}
			walls[arm.name] = append(walls[arm.name], time.Since(t0))
			h.Close(stdctx.Background())
			cpu[arm.name] += rusage(b, syscall.RUSAGE_SELF) + rusage(b, syscall.RUSAGE_CHILDREN) - c0
		}
	}
	for _, arm := range []string{"on", "off"} {
		slices.Sort(walls[arm])
		b.ReportMetric(float64(walls[arm][len(walls[arm])/2].Microseconds())/1000, "ms-median-"+arm)
		b.ReportMetric(float64(cpu[arm].Microseconds())/1000/float64(b.N), "cpu-ms-"+arm)
	}
}

func rusage(b *testing.B, who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
