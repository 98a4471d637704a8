package attachments_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/attachments"
)

// backend is one place a store keeps its blobs, for the tests that hold
// for every persisted backend.
type backend struct {
	// dir is the disk store's directory; "" for JetStream.
	dir string
	// open returns a new store on the same blobs and markers: the next
	// start of dsh, or another process, or another host.
	open func(t testing.TB, limits attachments.Limits) *attachments.Store
}

var jsStreams atomic.Int64

// eachBackend runs test for a directory and for a JetStream server.
func eachBackend(t *testing.T, test func(t *testing.T, b backend)) {
	t.Run("disk", func(t *testing.T) {
		dir := t.TempDir()
		test(t, backend{dir: dir, open: func(t testing.TB, limits attachments.Limits) *attachments.Store {
			t.Helper()
			s, err := attachments.Open(dir, limits)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}})
	})
	t.Run("jetstream", func(t *testing.T) {
		srv := natstest.Single(t)
		cfg := natsplugin.Config{}.Defaults()
		cfg.URL, cfg.Stream, cfg.LeaseTTL = srv.ClientURL(), fmt.Sprintf("A%d", jsStreams.Add(1)), 3*time.Second
		test(t, backend{open: func(t testing.TB, limits attachments.Limits) *attachments.Store {
			t.Helper()
			b, err := cfg.AttachmentsBackend()
			if err != nil {
				t.Fatal(err)
			}
			s := attachments.NewStore(b, limits)
			t.Cleanup(func() { s.Close() })
			return s
		}})
	})
}

// referrers returns the sessions referencing ref, failing the test on an
// error.
func referrers(t testing.TB, s *attachments.Store, ref string) []string {
	t.Helper()
	got, err := s.Referrers(ref)
	if err != nil {
		t.Fatal(err)
	}
	return got
}
