package host

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/sdk/proto/pluginv1"
	"github.com/hashicorp/go-hclog"
)

type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *lines) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// TestDroppedNotificationsAreCountedAndReported: past the queue, each
// drop is counted; the first is reported at once, the rest in one line
// (not one each), and what is left unreported is reported at the end.
func TestDroppedNotificationsAreCountedAndReported(t *testing.T) {
	out := &lines{}
	r := newRemote(Entry{ID: "slow"}, hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Debug}))
	// No sender runs: the plugin is as far behind as it gets.
	for range emitQueue + 5 {
		r.enqueueEmit(&pluginv1.EmitRequest{Event: "agent/status"})
	}
	if got := r.drops.Total(); got != 5 {
		t.Fatalf("counted %d drops, want 5", got)
	}
	if n := strings.Count(out.String(), "behind on notifications"); n != 1 || !strings.Contains(out.String(), "dropped=1 dropped_total=1") {
		t.Fatalf("the first drop is reported once, the next ones wait:\n%s", out.String())
	}
	r.drops.flush(r.log, r.entry)
	if !strings.Contains(out.String(), "plugin=slow dropped=4 dropped_total=5") {
		t.Fatalf("what was left unreported must be reported:\n%s", out.String())
	}
}

// TestTheDefaultCallTimeout: an entry without timeout: gets
// DefaultCallTimeout; timeout: 0 means no bound.
func TestTheDefaultCallTimeout(t *testing.T) {
	cfg, err := Parse("t.yaml", []byte("plugins:\n  - id: a\n    exec: /bin/sh\n  - id: b\n    exec: /bin/sh\n    timeout: 0\n  - id: c\n    exec: /bin/sh\n    timeout: 2s\n"), LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{DefaultCallTimeout, 0, 2 * time.Second} {
		if got := (&remote{entry: cfg.Plugins[i]}).callTimeout(); got != want {
			t.Errorf("%s: call timeout %s, want %s", cfg.Plugins[i].ID, got, want)
		}
	}
}
