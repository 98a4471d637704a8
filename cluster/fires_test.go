package cluster_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/natstest"
)

func openFires(t *testing.T, url, stream, host string, replicas int) *cluster.Fires {
	t.Helper()
	f, err := cluster.OpenFires(ctxT(t), cluster.Options{URL: url, Stream: stream, HostID: host, Replicas: replicas})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Hosts racing for the same scheduled time: exactly one wins it; a time
// at or before the latest claimed is nobody's; the next time is won again
// by exactly one.
func TestOneHostWinsEachScheduledTime(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	var hosts []*cluster.Fires
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		hosts = append(hosts, openFires(t, srv.ClientURL(), stream, id, 1))
	}
	t0 := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC)
	race := func(name string, at time.Time) int {
		var won atomic.Int32
		var wg sync.WaitGroup
		for _, f := range hosts {
			for range 4 { // several schedulers of one host too
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok, err := f.Claim(ctxT(t), name, at)
					if err != nil {
						t.Error(err)
					}
					if ok {
						won.Add(1)
					}
				}()
			}
		}
		wg.Wait()
		return int(won.Load())
	}
	for i := range 5 {
		at := t0.Add(time.Duration(i) * time.Second)
		if n := race("every second", at); n != 1 {
			t.Fatalf("%d claims won the run at %s; want exactly 1", n, at)
		}
	}
	if n := race("every second", t0.Add(2*time.Second)); n != 0 {
		t.Fatalf("%d claims won a time before the latest claimed; want none", n)
	}
	// Another schedule, and a name that is not a key token, are their own.
	if n := race("nightly report / ünïcode", t0); n != 1 {
		t.Fatalf("%d claims won the first run of a second schedule; want 1", n)
	}
}

// Three hosts started together on a fresh three-node cluster all open
// the replicated bucket: concurrent creates are retried, not failed.
func TestHostsStartedTogetherAllOpenTheFiresBucket(t *testing.T) {
	c := natstest.Boot(t, 3)
	stream := streamName()
	errc := make(chan error, 3)
	for _, id := range []string{"a", "b", "c"} {
		go func() {
			f, err := cluster.OpenFires(ctxT(t), cluster.Options{URL: c.URLs(), Stream: stream, HostID: id, Replicas: 3})
			if err == nil {
				_, err = f.Claim(ctxT(t), "s", time.Unix(1, 0))
				f.Close()
			}
			errc <- err
		}()
	}
	for range 3 {
		if err := <-errc; err != nil {
			t.Fatalf("a host could not open the fires bucket: %v", err)
		}
	}
}

// A claim that cannot reach the engine fails with the cluster's code, so
// the scheduler skips the run rather than run it twice.
func TestAClaimWithoutTheEngineFails(t *testing.T) {
	srv := startServer(t, 0)
	f := openFires(t, srv.ClientURL(), streamName(), "a", 1)
	f.Close()
	ok, err := f.Claim(ctxT(t), "s", time.Unix(5, 0))
	if ok || !errs.HasCode(err, cluster.Unreachable) {
		t.Fatalf("claim on a closed connection: %v, %v; want false and %s", ok, err, cluster.Unreachable)
	}
}
