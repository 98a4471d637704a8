package attachments_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/attachments"
)

// cpuTime is the process's user+system time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkStoreAndRelease5MB stores a fresh 5 MB image and releases it
// (a refused prompt's life in the store), against the floor of writing
// and syncing the same bytes to a file and removing it.
func BenchmarkStoreAndRelease5MB(b *testing.B) {
	img := make([]byte, 5<<20)
	rand.Read(img)
	copy(img, "\x89PNG\r\n\x1a\n")
	b.Run("floor=write+fsync+remove", func(b *testing.B) {
		dir := b.TempDir()
		b.ReportAllocs()
		b.SetBytes(int64(len(img)))
		cpu := cpuTime(b)
		for i := 0; b.Loop(); i++ {
			img[8] = byte(i)
			path := filepath.Join(dir, "f")
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			f.Write(img)
			f.Sync()
			f.Close()
			os.Remove(path)
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("store", func(b *testing.B) {
		s, err := attachments.Open(b.TempDir(), attachments.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.SetBytes(int64(len(img)))
		cpu := cpuTime(b)
		for i := 0; b.Loop(); i++ {
			img[8], img[9] = byte(i), byte(i>>8)
			_, release, err := s.Put("s1", img)
			if err != nil {
				b.Fatal(err)
			}
			release()
		}
		b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(s.Written())/float64(b.N), "written-B/op")
	})
}
