package faults

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/hashicorp/go-hclog"
)

// killYAML mounts the test plugin as every agent's admission on the root.
// A restart window shorter than the time between kills lets each crash
// count alone, so the plugin is restarted with the first backoff every
// time instead of being given up.
const killYAML = `plugins:
  - use: llm.scripted
  - id: guard
    exec: %s
    config: {}
    timeout: 10s
    restart_window: 200ms
    max_restarts: 3
agents:
%s`

// startHost builds an in-process host from yaml, closed when the test ends.
func startHost(t *testing.T, yaml string) *host.Host {
	t.Helper()
	cfg, err := config.Parse("faults.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	return h
}

// TestPluginKilledUnderLoad sends prompts to several agents through an
// admission plugin binary that is killed every few hundred milliseconds:
// every prompt is either admitted and recorded exactly once, or refused
// with an error that names the plugin and the cause. Nothing is lost,
// nothing is answered twice.
func TestPluginKilledUnderLoad(t *testing.T) {
	b := binaries(t)
	const agentCount = 4
	quota := 40 * scale()   // prompts per agent
	minKills := 6 * scale() // the load lasts at least this many kills
	interval := 300 * time.Millisecond
	var agentsYAML strings.Builder
	for i := range agentCount {
		fmt.Fprintf(&agentsYAML, "  - id: a%d\n    provider: scripted\n", i)
	}
	h := startHost(t, fmt.Sprintf(killYAML, b.testplugin, agentsYAML.String()))
	o := &outcome{fault: fmt.Sprintf("admission plugin SIGKILLed every %v under load (%d agents)", interval, agentCount)}
	defer record(o)

	var (
		mu       sync.Mutex
		kills    atomic.Int64
		killedAt time.Time
		down     = true // no admission since the last kill (or the start)
		admitted = map[string][]string{}
		refused  = map[string][]string{}
	)
	stop := make(chan struct{})
	killerDone := make(chan struct{})
	recovered := make(chan struct{}, 1) // an admission succeeded after the last kill
	go func() {
		defer close(killerDone)
		for {
			// Kill a plugin that serves again: a kill during its start
			// would test the start, not the load.
			select {
			case <-stop:
				return
			case <-recovered:
			}
			select {
			case <-stop:
				return
			case <-time.After(interval):
			}
			if pids := processesOf(b.testplugin); len(pids) > 0 && syscall.Kill(pids[0], syscall.SIGKILL) == nil {
				mu.Lock()
				killedAt = time.Now()
				down = true
				mu.Unlock()
				kills.Add(1)
			} else {
				recovered <- struct{}{}
			}
		}
	}()

	var wg sync.WaitGroup
	for i := range agentCount {
		id := fmt.Sprintf("a%d", i)
		agent, ok := h.Agent(id)
		if !ok {
			t.Fatalf("no agent %s", id)
		}
		wg.Go(func() {
			for n := 0; n < quota || kills.Load() < int64(minKills); n++ {
				text := fmt.Sprintf("%s-prompt-%d", id, n)
				sent := time.Now()
				_, err := h.Controller().Deliver(stdctx.Background(), agent, agentcontroller.Request{Mode: agentcontroller.Followup, Content: text})
				mu.Lock()
				o.tries++
				if err != nil {
					refused[id] = append(refused[id], text)
					// The cause is a PLUGIN_ code in the chain, or the
					// host's reason when the refusal is the host's own.
					cause := string(pluginCause(err))
					if cause == "" && strings.HasPrefix(errs.ReasonOf(err), "host/plugin-") {
						cause = errs.ReasonOf(err)
					}
					o.refuse(fmt.Sprintf("%s %s (%s)", errs.CodeOf(err), errs.ReasonOf(err), cause))
					if !strings.Contains(err.Error(), `"guard"`) || cause == "" {
						t.Errorf("a refusal that does not name the plugin and the cause: %v", err)
					}
				} else {
					admitted[id] = append(admitted[id], text)
					// Only a prompt sent after the kill proves the plugin
					// is back; one in flight may have been served before.
					if down && sent.After(killedAt) {
						if !killedAt.IsZero() {
							o.recover = append(o.recover, time.Since(killedAt))
						}
						down = false
						recovered <- struct{}{}
					}
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(10 * time.Millisecond) // a client's pause before its next prompt, not an assertion
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-killerDone
	if kills.Load() == 0 {
		t.Fatal("the plugin was never killed")
	}

	for i := range agentCount {
		id := fmt.Sprintf("a%d", i)
		agent, _ := h.Agent(id)
		agent.WhenIdle(stdctx.Background())
		seen, ends := map[string]int{}, map[string]string{}
		var inTurn []string
		for _, e := range agent.Session().Events(1) {
			switch {
			case e.Type == "user/message" && e.Message != nil:
				seen[e.Message.Content]++
				inTurn = append(inTurn, e.Message.Content)
			case e.Type == "turn/end":
				for _, p := range inTurn {
					ends[p] = e.Reason
				}
				inTurn = nil
				// A turn may fail when the plugin dies under one of its
				// waterfalls; the error must say which plugin and why.
				if e.Reason != "completed" && (e.Reason != "error" || !strings.Contains(e.Error, `"guard"`) || !strings.Contains(e.Error, "PLUGIN_")) {
					t.Errorf("agent %s: a turn ended %q without naming the plugin and the cause: %s", id, e.Reason, e.Error)
				}
			}
		}
		for _, text := range admitted[id] {
			switch {
			case seen[text] == 0:
				o.lost++
			case seen[text] > 1:
				o.doubled++
			case ends[text] == "completed":
				o.kept++
			default:
				o.refuse("turn failed: " + ends[text])
			}
		}
		for _, text := range refused[id] {
			if seen[text] > 0 {
				o.doubled++ // refused to the sender, yet run: a retry would run it twice
			}
		}
	}
	t.Logf("%d prompts, %d kills", o.tries, kills.Load())
	if o.lost > 0 || o.doubled > 0 {
		t.Fatalf("%d prompts lost, %d doubled (of %d, %d kills)", o.lost, o.doubled, o.tries, kills.Load())
	}
}

// processesOf lists live processes running bin (zombies excluded).
func processesOf(bin string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err != nil || exe != bin {
			continue
		}
		stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if f := strings.Fields(string(stat)); len(f) > 2 && f[2] == "Z" {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// pluginCause is the plugin error code in err's chain: why the plugin
// could not decide.
func pluginCause(err error) errs.Code {
	for _, c := range []errs.Code{execplugin.PluginCrashed, execplugin.PluginTimeout, execplugin.PluginProtocol, execplugin.PluginStartFailed, errs.PluginFailed} {
		if errs.HasCode(err, c) {
			return c
		}
	}
	return ""
}
