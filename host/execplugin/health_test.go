package execplugin_test

import (
	stdctx "context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

// stopPlugin freezes the plugin process of entry id with SIGSTOP: alive,
// its socket still accepting connections, but nothing in it answers — the
// plugin that never exits, so only a health check can find it.
func stopPlugin(t *testing.T, h *host.Host, id string) int {
	t.Helper()
	p, ok := h.ExecPlugin(id)
	pid := execplugin.PID(p)
	if !ok || pid == 0 {
		t.Fatalf("plugin %s is not running", id)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitNewPID waits until entry id runs in a process other than old.
func waitNewPID(t *testing.T, h *host.Host, id string, old int, within time.Duration, logs *logBuffer) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		p, _ := h.ExecPlugin(id)
		if pid := execplugin.PID(p); pid != 0 && pid != old && execplugin.RPC(p) != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin %s was not restarted within %s\n%s", id, within, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStuckPluginIsRestartedAfterACallTimesOut: a call into a stopped
// plugin times out, the health check that follows gets no answer, and the
// plugin is restarted; meanwhile calls fail closed, saying why, and after
// it the plugin serves again.
func TestStuckPluginIsRestartedAfterACallTimesOut(t *testing.T) {
	bin, _ := binaries(t)
	// An hour's interval: only the timeout can trigger the check.
	h, logs := startExec(t, execConfig(bin, `{refuse_word: spam}`, "    timeout: 300ms\n    health_timeout: 1s\n    health_interval: 1h\n"))
	old := stopPlugin(t, h, "guard")
	start := time.Now()
	if _, err := send(h, stdctx.Background(), "main", "hello"); !errs.HasCode(err, execplugin.PluginTimeout) {
		t.Fatalf("a call into a stopped plugin: %v\n%s", err, logs.String())
	}
	sawWhy := false
	for {
		_, err := send(h, stdctx.Background(), "main", "hello")
		if err == nil {
			break
		}
		if errs.Has(err, execplugin.PluginUnhealthy, execplugin.ReasonUnhealthy) {
			if !strings.Contains(err.Error(), `plugin "guard"`) || !strings.Contains(err.Error(), "did not answer its health check in 1s; restarting") {
				t.Fatalf("the refusal must say which plugin and why: %v", err)
			}
			sawWhy = true
		} else if !errs.HasCode(err, execplugin.PluginTimeout) && !unavailable(err) {
			// Timed out before the check, refused as unhealthy after it,
			// or refused as not running between the kill and the new
			// process: each fails closed and says why.
			t.Fatalf("while the stuck plugin is restarted, calls fail closed: %v\n%s", err, logs.String())
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("the stuck plugin was not restarted within 10s: %v\n%s", err, logs.String())
		}
	}
	waitNewPID(t, h, "guard", old, time.Second, logs)
	if _, err := send(h, stdctx.Background(), "main", "spam"); err == nil {
		t.Fatal("the restarted plugin must refuse spam again")
	}
	if !strings.Contains(logs.String(), "did not answer its health check in 1s") {
		t.Fatalf("the restart's reason was not logged:\n%s", logs.String())
	}
	t.Logf("stuck to serving again: %s (saw the unhealthy refusal: %v)", time.Since(start), sawWhy)
}

// TestStuckPluginIsFoundByTheIntervalCheck: with no call at all, the
// periodic check finds a stopped plugin and restarts it.
func TestStuckPluginIsFoundByTheIntervalCheck(t *testing.T) {
	bin, _ := binaries(t)
	h, logs := startExec(t, execConfig(bin, `{}`, "    health_timeout: 1s\n    health_interval: 200ms\n"))
	old := stopPlugin(t, h, "guard")
	waitNewPID(t, h, "guard", old, 5*time.Second, logs)
	if !strings.Contains(logs.String(), `plugin "guard"`) || !strings.Contains(logs.String(), "did not answer its health check in 1s") {
		t.Fatalf("the restart's reason was not logged:\n%s", logs.String())
	}
	if _, err := send(h, stdctx.Background(), "main", "hello"); err != nil {
		t.Fatalf("after the restart: %v", err)
	}
}

// TestBusyPluginIsNotRestarted: a plugin holding a long call still
// answers its health check, so frequent checks leave it alone.
func TestBusyPluginIsNotRestarted(t *testing.T) {
	bin, _ := binaries(t)
	h, logs := startExec(t, execConfig(bin, `{hold_word: wait, hold_ms: 1500}`, "    health_timeout: 1s\n    health_interval: 50ms\n"))
	p, _ := h.ExecPlugin("guard")
	pid := execplugin.PID(p)
	if _, err := send(h, stdctx.Background(), "main", "wait"); err != nil {
		t.Fatalf("the held call: %v\n%s", err, logs.String())
	}
	if now := execplugin.PID(p); now != pid || strings.Contains(logs.String(), "health check") {
		t.Fatalf("a busy plugin was restarted (pid %d, then %d):\n%s", pid, now, logs.String())
	}
}

// TestAToolCallIntoAStuckPluginFailsClosedSayingWhy: with no call timeout,
// a tool call into a stopped plugin would wait forever; the interval check
// finds the plugin stuck and restarts it, and the call ends as an error
// result that says why.
func TestAToolCallIntoAStuckPluginFailsClosedSayingWhy(t *testing.T) {
	bin := toolPlugin(t)
	// A second to answer: a loaded machine (-race, -count) can take longer
	// than 200ms to answer a healthy plugin's check.
	h, logs := startExec(t, toolConfig(bin, "{}", "    timeout: 0s\n    health_interval: 200ms\n    health_timeout: 1s\n", ""))
	old := stopPlugin(t, h, "tools")
	r := callTool(t, h, "main", "echo", `{"text":"x"}`)
	if !r.IsError || !strings.Contains(r.Content, `The tool "echo" is unavailable`) || !strings.Contains(r.Content, `plugin "tools"`) ||
		!strings.Contains(r.Content, "did not answer its health check in 1s; restarting") {
		t.Fatalf("a tool call in flight when the stuck plugin was killed: %+v\n%s", r, logs.String())
	}
	waitNewPID(t, h, "tools", old, 5*time.Second, logs)
	if r := callTool(t, h, "main", "echo", `{"text":"x"}`); r.IsError {
		t.Fatalf("after the restart: %+v", r)
	}
}

// unavailable reports the refusal of a call made while the plugin is not
// running: between its kill and its new process.
func unavailable(err error) bool {
	ref, ok := agentcontroller.RefusalOf(err)
	return ok && ref.Reason == execplugin.ReasonUnavailable
}
