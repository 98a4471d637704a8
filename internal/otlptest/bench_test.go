package otlptest

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// childCPU is the CPU time, user and system, of the children waited for
// so far: the collector's work, which the test process's own CPU time
// does not include.
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStart is what each telemetry test pays for its collector: start
// until both receivers listen, then stop. The floor is the same binary
// run to exit with --version, which loads it but starts no pipeline.
func BenchmarkStart(b *testing.B) {
	bin := Binary(b)
	run := func(b *testing.B, once func(b *testing.B)) {
		b.ReportAllocs()
		cpu := childCPU()
		for b.Loop() {
			once(b)
		}
		b.ReportMetric(float64(childCPU()-cpu)/float64(b.N), "child-cpu-ns/op")
	}
	b.Run("floor=version", func(b *testing.B) {
		run(b, func(b *testing.B) {
			if err := exec.Command(bin, "--version").Run(); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("start-stop", func(b *testing.B) {
		run(b, func(b *testing.B) {
			_, stop, err := start(bin, b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			stop()
		})
	})
}
