package permission_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
)

func cpuNow(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReadOnlyCommand is what plan mode spends deciding whether a
// bash command only reads, on a pipeline that does and on sed -i;
// parse-floor is parsing the pipeline alone, which it does once.
func BenchmarkReadOnlyCommand(b *testing.B) {
	b.Run("parse-floor", func(b *testing.B) {
		b.ReportAllocs()
		cpu := cpuNow(b)
		for b.Loop() {
			if _, err := shell.Parse("git log --oneline -20 | grep -i fix | head -5"); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuNow(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
	for _, c := range []struct{ name, cmd string }{
		{"pipeline", "git log --oneline -20 | grep -i fix | head -5"},
		{"sed-i", "sed -i 's/a/b/' main.go"},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			cpu := cpuNow(b)
			for b.Loop() {
				permission.ReadOnlyCommand(c.cmd, "/work/ws")
			}
			b.ReportMetric(float64(cpuNow(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}
