package faults

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/hashicorp/go-hclog"
)

// stuckYAML mounts the fault plugin with a short start_timeout.
const stuckYAML = `plugins:
  - use: llm.scripted
  - id: stuck
    exec: %s
    args: [%s]
    start_timeout: 1s
agents:
  - id: main
    provider: scripted
`

// startTimeout is the reason of a start that ran out of start_timeout.
const startTimeout = "host/plugin-start-timeout"

// TestPluginStuckInEachStartPhase starts a plugin that never finishes its
// handshake, its Describe or its Configure: the start fails with
// PLUGIN_TIMEOUT naming the plugin and the phase, and leaves no process.
func TestPluginStuckInEachStartPhase(t *testing.T) {
	b := binaries(t)
	for _, phase := range []struct{ arg, name string }{
		{"handshake", "the handshake"}, {"describe", "Describe"}, {"configure", "Configure"},
	} {
		t.Run(phase.arg, func(t *testing.T) {
			o := &outcome{fault: "plugin stuck in " + phase.name + " (start_timeout 1s)"}
			defer record(o)
			for range 2 * scale() {
				o.tries++
				cfg, err := config.Parse("faults.yaml", []byte(fmt.Sprintf(stuckYAML, b.faultplugin, "--hang="+phase.arg)), config.LoadOptions{Environ: []string{}})
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				h, err := within(t, "host.Start", func() (*host.Host, error) {
					return host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
				})
				if err == nil {
					h.Close(stdctx.Background())
					t.Fatal("a plugin that hangs in its start did not fail the start")
				}
				o.recover = append(o.recover, time.Since(start))
				if !errs.Has(err, execplugin.PluginTimeout, startTimeout) || !strings.Contains(err.Error(), `"stuck"`) || !strings.Contains(err.Error(), phase.name) {
					// Go on: the table shows how often the code is wrong.
					t.Errorf("want PLUGIN_TIMEOUT (%s) naming the plugin and %q, got %v", startTimeout, phase.name, err)
					o.refuse(fmt.Sprintf("wrong: %s", pluginCause(err)))
				} else {
					o.refuse(fmt.Sprintf("%s %s", execplugin.PluginTimeout, startTimeout))
				}
				if left := processesOf(b.faultplugin); len(left) > 0 {
					t.Fatalf("a failed start left plugin processes: %v", left)
				}
			}
		})
	}
}

// TestPluginStuckAtShutdown closes a host whose plugin ignores the stop and
// leaves a grandchild holding its output pipes: Close returns within its
// context, and neither process survives it.
func TestPluginStuckAtShutdown(t *testing.T) {
	b := binaries(t)
	o := &outcome{fault: "plugin ignoring shutdown, grandchild holding its pipes"}
	defer record(o)
	for i := range 2 * scale() {
		o.tries++
		pidfile := filepath.Join(t.TempDir(), "grandchild")
		// The start is not the fault here: a loaded machine may take more
		// than the other tests' 1s to start the plugin.
		yaml := strings.Replace(fmt.Sprintf(stuckYAML, b.faultplugin, `"--hang=shutdown", "--pidfile=`+pidfile+`"`), "start_timeout: 1s", "start_timeout: 20s", 1)
		cfg, err := config.Parse("faults.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
		if err != nil {
			t.Fatal(err)
		}
		grandchild := readPid(t, pidfile)
		t.Cleanup(func() { syscall.Kill(grandchild, syscall.SIGKILL) })
		plugin := processesOf(b.faultplugin)

		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), hangLimit)
		start := time.Now()
		_, err = within(t, "Host.Close", func() (struct{}, error) { return struct{}{}, h.Close(ctx) })
		o.recover = append(o.recover, time.Since(start))
		expired := ctx.Err()
		cancel()
		if expired != nil {
			t.Fatalf("try %d: Close ran into its context (%v): teardown is unbounded", i, err)
		}
		for _, pid := range append(plugin, grandchild) {
			if alive(pid) {
				o.lost++ // a process that outlives dsh
				t.Fatalf("try %d: process %d outlived Close", i, pid)
			}
		}
		o.kept++
	}
}

func readPid(t *testing.T, file string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the plugin wrote no pid file: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// alive reports whether pid runs (a zombie waiting for its parent does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(stat))
	return len(f) > 2 && f[2] != "Z" && f[2] != "X"
}

// within runs fn and fails the test if it does not return within hangLimit,
// so that a hang shows as a failure instead of the test binary's timeout.
// A hung fn is left behind: the test has failed anyway.
func within[T any](t *testing.T, what string, fn func() (T, error)) (T, error) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-time.After(hangLimit):
		t.Fatalf("%s hung for %v", what, hangLimit)
		panic("unreachable")
	}
}
