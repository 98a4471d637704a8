package main

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/hashicorp/go-hclog"
)

type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// replaceFile swaps path's content in one rename, as editors save: a write
// in place could be read half done by the watcher, and an empty config is a
// valid one that would stop every plugin.
func replaceFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("never: %s", what)
}

func TestWatchReloadsOnChangeAndKeepsOldOnBreakage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	base := "plugins:\n  - use: llm.scripted\n  - id: limits\n    use: admission.rate-limit\n    config: {per_minute: 10}\nagents:\n  - id: main\n    provider: scripted\n"
	os.WriteFile(path, []byte(base), 0o644)
	opts := config.LoadOptions{Path: path, Environ: []string{}}
	cfg, err := config.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	h, err := host.Start(cfg, host.Options{Logger: hclog.New(&hclog.LoggerOptions{Output: logs})})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	stop := watch(h, opts, 20*time.Millisecond)
	defer stop()

	before, _ := h.PluginFiber("limits")
	replaceFile(t, path, strings.Replace(base, "per_minute: 10", "per_minute: 20", 1))
	eventually(t, "the changed entry restarted", func() bool {
		f, ok := h.PluginFiber("limits")
		return ok && f != before
	})
	after, _ := h.PluginFiber("limits")

	replaceFile(t, path, "plugins: [\n")
	eventually(t, "the broken file was reported", func() bool {
		return strings.Contains(logs.String(), "keeping the running config")
	})
	if f, ok := h.PluginFiber("limits"); !ok || f != after {
		t.Fatal("a broken file must leave the running config alone")
	}
}

// TestWatchWaitsForAFileBeingWritten truncates the config in place, as an
// editor saving in place does between its truncate and its write, and
// checks that a read of the empty file does not reload dsh to an empty
// config that would stop every plugin; a change that two reads agree on is
// applied.
func TestWatchWaitsForAFileBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	base := "plugins:\n  - use: llm.scripted\n  - id: limits\n    use: admission.rate-limit\n    config: {per_minute: 10}\nagents:\n  - id: main\n    provider: scripted\n"
	os.WriteFile(path, []byte(base), 0o644)
	opts := config.LoadOptions{Path: path, Environ: []string{}}
	cfg, err := config.Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	ticks := make(chan time.Time)
	stop := watchTicks(h, opts, ticks)
	defer stop()
	// A send returns once the watcher took the tick, so the third send
	// returns only after the reads and the reload of the first two are done.
	tick := func() { ticks <- time.Time{}; ticks <- time.Time{}; ticks <- time.Time{} }

	before, _ := h.PluginFiber("limits")
	os.WriteFile(path, nil, 0o644) // the editor truncated ...
	ticks <- time.Time{}           // ... and the watcher read it then
	os.WriteFile(path, []byte(base), 0o644)
	tick()
	if f, ok := h.PluginFiber("limits"); !ok || f != before {
		t.Fatal("a file read while it was empty reloaded the config")
	}

	os.WriteFile(path, []byte(strings.Replace(base, "per_minute: 10", "per_minute: 20", 1)), 0o644)
	tick()
	if f, ok := h.PluginFiber("limits"); !ok || f == before {
		t.Fatal("a change two reads agree on was not applied")
	}
}
