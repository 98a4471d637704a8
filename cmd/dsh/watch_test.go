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

// TestWatchWaitsForAFileBeingWritten has the watcher read the config while
// an editor saving in place has truncated it and not yet written it, and
// checks that the empty read does not reload dsh to an empty config — a
// valid one, which would stop every plugin and agent; a change that two
// reads agree on is applied.
func TestWatchWaitsForAFileBeingWritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	base := "plugins:\n  - use: llm.scripted\n  - id: limits\n    use: admission.rate-limit\n    config: {per_minute: 10}\nagents:\n  - id: main\n    provider: scripted\n"
	changed := strings.Replace(base, "per_minute: 10", "per_minute: 20", 1)
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
	// The file as each read finds it: the starting content, an empty
	// moment, the content back (read twice: the last tick only waits).
	reads := make(chan string, 8)
	for _, c := range []string{base, "", base, base} {
		reads <- c
	}
	ticks := make(chan time.Time)
	stop := watchTicks(h, opts, ticks, func(string) ([]byte, error) { return []byte(<-reads), nil })
	defer stop()
	// A send returns once the watcher took the tick, so a send returns only
	// after the read and reload of every earlier tick are done.
	tick := func(n int) {
		for range n + 1 {
			ticks <- time.Time{}
		}
	}

	before, _ := h.PluginFiber("limits")
	tick(2) // reads "" and then base
	if f, ok := h.PluginFiber("limits"); !ok || f != before {
		t.Fatal("a file read while it was empty reloaded the config")
	}
	for range 3 {
		reads <- changed // a real change, read by two ticks and the waiting one
	}
	tick(2)
	if f, ok := h.PluginFiber("limits"); !ok || f == before {
		t.Fatal("a change two reads agree on was not applied")
	}
}
