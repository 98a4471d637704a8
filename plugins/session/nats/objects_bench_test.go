package nats_test

import (
	stdctx "context"
	"crypto/rand"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/attachments"
)

// benchConfig is a session.nats config on a server of the benchmark's
// own.
func benchConfig(b *testing.B) natsplugin.Config {
	cfg := natsplugin.Config{}.Defaults()
	cfg.URL, cfg.Stream = natstest.Single(b).ClientURL(), streamName()
	return cfg
}

// benchStore opens a JetStream attachments store on cfg's stream, as a
// host would.
func benchStore(b *testing.B, cfg natsplugin.Config) *attachments.Store {
	b.Helper()
	be, err := cfg.AttachmentsBackend()
	if err != nil {
		b.Fatal(err)
	}
	s := attachments.NewStore(be, attachments.Limits{})
	b.Cleanup(func() { s.Close() })
	return s
}

// BenchmarkSharedStorePutRelease stores a fresh blob and releases it (a
// refused prompt's life in the store) in JetStream; compare with
// services/attachments' BenchmarkStoreAndRelease5MB on disk.
func BenchmarkSharedStorePutRelease(b *testing.B) {
	for _, size := range []int{100 << 10, 5 << 20} {
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			s := benchStore(b, benchConfig(b))
			data := make([]byte, size)
			rand.Read(data)
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for i := 0; b.Loop(); i++ {
				data[0], data[1] = byte(i), byte(i>>8)
				_, release, err := s.Put("s1", data)
				if err != nil {
					b.Fatal(err)
				}
				release()
			}
		})
	}
}

// BenchmarkSharedStoreReadOnAnotherHost reads a 1 MB blob stored by
// another host: what a host that took a session over pays once per image
// (its cache serves the next steps).
func BenchmarkSharedStoreReadOnAnotherHost(b *testing.B) {
	cfg := benchConfig(b)
	writer, reader := benchStore(b, cfg), benchStore(b, cfg)
	data := make([]byte, 1<<20)
	rand.Read(data)
	var refs []string
	for i := range 64 {
		data[0] = byte(i)
		ref, _, err := writer.Put("s1", data)
		if err != nil {
			b.Fatal(err)
		}
		refs = append(refs, ref)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for i := 0; b.Loop(); i++ {
		// A fresh store each round of 64, so no read is from its cache.
		if i%64 == 0 && i > 0 {
			reader.Close()
			reader = benchStore(b, cfg)
		}
		if _, err := reader.Get(refs[i%64]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSharedStoreCollect is a host's start-up collection over 200
// blobs whose markers are all verified: what every host of a cluster pays
// at start, holding the store's lock.
func BenchmarkSharedStoreCollect(b *testing.B) {
	cfg := benchConfig(b)
	s := benchStore(b, cfg)
	data := make([]byte, 1<<10)
	logs := map[string]bool{}
	for i := range 200 {
		data[0], data[1] = byte(i), byte(i>>8)
		ref, _, err := s.Put(fmt.Sprintf("s%d", i%20), data)
		if err != nil {
			b.Fatal(err)
		}
		logs[ref] = true
	}
	verify := func(stdctx.Context, string) (map[string]bool, bool, error) { return logs, false, nil }
	if _, err := benchStore(b, cfg).Collect(b.Context(), verify, nil); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		got, err := benchStore(b, cfg).Collect(b.Context(), verify, nil)
		if err != nil || got.Blobs != 0 {
			b.Fatalf("%+v, %v", got, err)
		}
	}
}
