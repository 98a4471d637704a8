//go:build linux

package sandbox_test

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/sandbox"
)

// BenchmarkLaunch is the cost of one `bash -c true` in the sandbox against
// the floor, the same command started plainly from Go, in one run. With
// DSH_BENCH_BINARY naming a dsh build, the sandbox is entered through that
// binary instead of this test binary. Besides wall time per op it reports
// the CPU the children used (user + system, from getrusage).
func BenchmarkLaunch(b *testing.B) {
	st := sandbox.Probe()
	floor := func(b *testing.B) {
		if err := exec.Command("/bin/bash", "-c", "true").Run(); err != nil {
			b.Fatal(err)
		}
	}
	sandboxed := func(b *testing.B) { launch(b, st, sandbox.NetworkOff) }
	b.Run("floor", func(b *testing.B) {
		measure(b, func(b *testing.B) {
			for range b.N {
				floor(b)
			}
		})
	})
	b.Run("sandboxed", func(b *testing.B) {
		if !st.Namespaces {
			b.Skipf("no namespaces here: %s", st.NSReason)
		}
		measure(b, sandboxed)
	})
	// The host's network: no network namespace to create, which is most
	// of the wall time the kernel spends.
	b.Run("sandboxed-network-on", func(b *testing.B) {
		if !st.Namespaces {
			b.Skipf("no namespaces here: %s", st.NSReason)
		}
		measure(b, func(b *testing.B) { launch(b, st, sandbox.NetworkOn) })
	})
	if bin := os.Getenv("DSH_BENCH_BINARY"); bin != "" {
		b.Run("sandboxed-via-dsh", func(b *testing.B) {
			defer sandbox.SetLauncher(bin)()
			measure(b, sandboxed)
		})
	}
}

// launch runs bash -c true in the sandbox b.N times.
func launch(b *testing.B, st sandbox.Status, network sandbox.Network) {
	ws := b.TempDir()
	b.ResetTimer()
	for range b.N {
		cmd := exec.Command("/bin/bash", "-c", "true")
		e, err := sandbox.Attach(cmd, sandbox.Rules{Writable: []string{ws}, Network: network}, st)
		if err != nil {
			b.Fatal(err)
		}
		err = cmd.Start()
		e.Started()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		if err := e.Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// measure runs f and reports the children's CPU per op.
func measure(b *testing.B, f func(*testing.B)) {
	b.ReportAllocs()
	before := childCPU()
	f(b)
	b.ReportMetric(float64(childCPU()-before)/float64(b.N)/1e6, "cpu-ms/op")
}

func childCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
