package host_test

import (
	stdctx "context"
	"errors"
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
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/hashicorp/go-hclog"
)

// waitFile waits for a file a plugin writes as its signal.
func waitFile(t *testing.T, path string) []byte {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if b, err := os.ReadFile(path); err == nil {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closeOrFail closes h, failing the test if it hangs: every teardown step
// is bounded by seconds, so 30 means it waits on something it must not.
func closeOrFail(t *testing.T, h *host.Host) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		h.Close(stdctx.Background())
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("closing the host hung")
	}
}

// waitDead waits until pid no longer runs.
func waitDead(t *testing.T, pid int, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for running(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("%s (pid %d) is still running", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func running(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && syscall.Kill(pid, 0) == nil
}

func readPIDFile(t *testing.T, path string) int {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(string(waitFile(t, path))))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestAPluginSeesOnlyTheMinimalEnvironment: a provider key in dsh's
// environment never reaches a plugin unless its entry passes it through.
func TestAPluginSeesOnlyTheMinimalEnvironment(t *testing.T) {
	bin, _ := binaries(t)
	t.Setenv("DEEPSEEK_API_KEY", "sk-secret")
	t.Setenv("LC_TIME", "C")
	for _, tc := range []struct {
		extra string
		leaks bool
	}{
		{"    env: {OWN: \"1\"}\n", false},
		{"    env_passthrough: [DEEPSEEK_API_KEY]\n", true},
	} {
		file := filepath.Join(t.TempDir(), "env")
		h, _ := startExec(t, execConfig(bin, fmt.Sprintf("{env_file: %q}", file), tc.extra))
		env := strings.Split(string(waitFile(t, file)), "\n")
		closeOrFail(t, h)
		has := func(kv string) bool {
			for _, e := range env {
				if e == kv {
					return true
				}
			}
			return false
		}
		if has("DEEPSEEK_API_KEY=sk-secret") != tc.leaks {
			t.Errorf("%q: the key reached the plugin: %v, want %v", tc.extra, !tc.leaks, tc.leaks)
		}
		if !has("PATH="+os.Getenv("PATH")) || !has("LC_TIME=C") {
			t.Errorf("%q: the base environment is missing: %q", tc.extra, env)
		}
		if !tc.leaks && !has("OWN=1") {
			t.Errorf("the entry's env is missing: %q", env)
		}
	}
}

// TestAStartThatHangsFailsWithTheTimeoutNamingThePhase: start_timeout
// bounds Describe and Configure too, and nothing is left running.
func TestAStartThatHangsFailsWithTheTimeoutNamingThePhase(t *testing.T) {
	bin, _ := binaries(t)
	for phase, want := range map[string]string{"describe": "it hung in Describe", "configure": "it hung in Configure"} {
		t.Run(phase, func(t *testing.T) {
			extra := fmt.Sprintf("    start_timeout: 1s\n    env: {TESTPLUGIN_HANG: %s}\n", phase)
			cfg, err := host.Parse("exec.yaml", []byte(execConfig(bin, "{}", extra)), host.LoadOptions{Environ: []string{}})
			if err != nil {
				t.Fatal(err)
			}
			_, err = host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
			if !errs.Has(err, host.PluginTimeout, host.ReasonStartTimeout) || !strings.Contains(err.Error(), "within 1s: "+want) {
				t.Fatalf("got %v", err)
			}
			if pids := pluginPIDs(t, bin); len(pids) > 0 {
				t.Fatalf("a failed start left plugin processes: %v", pids)
			}
		})
	}
}

// TestAWrapperWhoseChildHoldsThePipesDoesNotHangClose: a wrapper script
// leaves a child holding the plugin's stdout and stderr; go-plugin's Kill
// used to wait for them to close. The group is killed, child included.
func TestAWrapperWhoseChildHoldsThePipesDoesNotHangClose(t *testing.T) {
	bin, _ := binaries(t)
	dir := t.TempDir()
	script, pidFile := filepath.Join(dir, "wrapper"), filepath.Join(dir, "sleep.pid")
	os.WriteFile(script, []byte("#!/bin/sh\nsleep 300 &\necho $! > \"$PIDFILE\"\nexec \"$PLUGIN\"\n"), 0o755)
	h, _ := startExec(t, execConfig(script, "{}", fmt.Sprintf("    env: {PIDFILE: %q, PLUGIN: %q}\n", pidFile, bin)))
	if _, err := send(h, stdctx.Background(), "main", "hi"); err != nil {
		t.Fatal(err)
	}
	sleeper := readPIDFile(t, pidFile)
	closeOrFail(t, h)
	waitDead(t, sleeper, "the wrapper's child")
}

// hangingRestart starts a plugin whose restarts hang in Configure, crashes
// it and waits until the restart hangs.
func hangingRestart(t *testing.T, extra string) (*host.Host, *logBuffer) {
	bin, _ := binaries(t)
	marker := filepath.Join(t.TempDir(), "started")
	h, logs := startExec(t, execConfig(bin, fmt.Sprintf("{crash_word: boom, hang_after_first: %q}", marker), "    start_timeout: 60s\n"+extra))
	send(h, stdctx.Background(), "main", "boom")
	waitFile(t, marker+".hung")
	return h, logs
}

// TestARestartThatHangsDoesNotBlockShutdown: closing the host ends a
// restart stuck in Configure at once, and leaves no process.
func TestARestartThatHangsDoesNotBlockShutdown(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := hangingRestart(t, "")
	closeOrFail(t, h)
	deadline := time.Now().Add(10 * time.Second)
	for len(pluginPIDs(t, bin)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("plugin processes left: %v", pluginPIDs(t, bin))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestDownPluginFailsClosedWithItsReason: while a plugin is being
// restarted, an entry with on_unavailable: fail refuses with its reason.
func TestDownPluginFailsClosedWithItsReason(t *testing.T) {
	h, _ := hangingRestart(t, "")
	_, err := send(h, stdctx.Background(), "main", "hello")
	if ref, ok := agentcontroller.RefusalOf(err); !ok || ref.Reason != host.ReasonUnavailable || !strings.Contains(ref.Message, "being restarted") {
		t.Fatalf("a down plugin must refuse with %s, got %v", host.ReasonUnavailable, err)
	}
}

// servesAgain waits until the plugin admits a message again.
func servesAgain(t *testing.T, h *host.Host, logs *logBuffer) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := send(h, stdctx.Background(), "main", "after")
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the plugin never served again: %v\n%s", err, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestTheRestartBudgetResetsAfterAStablePeriod: a crash counts against
// max_restarts only within restart_window; a plugin that ran longer than
// that since its last crash is restarted again.
func TestTheRestartBudgetResetsAfterAStablePeriod(t *testing.T) {
	bin, _ := binaries(t)
	const window = time.Second
	h, logs := startExec(t, execConfig(bin, `{crash_word: boom}`, fmt.Sprintf("    max_restarts: 1\n    restart_window: %s\n", window)))
	first := time.Now()
	send(h, stdctx.Background(), "main", "boom")
	servesAgain(t, h, logs)
	time.Sleep(time.Until(first.Add(window + 100*time.Millisecond))) // the first crash leaves the window
	send(h, stdctx.Background(), "main", "boom")
	servesAgain(t, h, logs)
	if strings.Contains(logs.String(), "gave up") {
		t.Fatalf("a crash outside the window counted:\n%s", logs.String())
	}
}

// TestAGivenUpPluginSaysSo: past its budget the plugin stays down, the
// host logs that once as an error, and every refusal says why.
func TestAGivenUpPluginSaysSo(t *testing.T) {
	bin, _ := binaries(t)
	h, logs := startExec(t, execConfig(bin, `{crash_word: boom}`, "    max_restarts: 1\n"))
	send(h, stdctx.Background(), "main", "boom")
	servesAgain(t, h, logs)
	send(h, stdctx.Background(), "main", "boom")
	deadline := time.Now().Add(15 * time.Second)
	for refusals := 0; refusals < 3; {
		_, err := send(h, stdctx.Background(), "main", "hello")
		ref, _ := agentcontroller.RefusalOf(err)
		switch {
		case ref.Reason == host.ReasonGivenUp:
			if !strings.Contains(ref.Message, `"guard"`) || !strings.Contains(ref.Message, "given up after 2 crashes within 10m0s") {
				t.Fatalf("the refusal does not say the plugin was given up: %q", ref.Message)
			}
			refusals++
		case time.Now().After(deadline):
			t.Fatalf("the plugin was never given up: %v\n%s", err, logs.String())
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	var gaveUp []string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "gave up") {
			gaveUp = append(gaveUp, line)
		}
	}
	if len(gaveUp) != 1 || !strings.Contains(gaveUp[0], "[ERROR]") || !strings.Contains(gaveUp[0], "crashed 2 times within 10m0s, more than max_restarts (1)") {
		t.Fatalf("giving up must be logged once as an error, got:\n%s", strings.Join(gaveUp, "\n"))
	}
}

// laggingDeadline reports a deadline its Done channel only honours later:
// a host whose timer fires late, as on a loaded machine.
type laggingDeadline struct {
	stdctx.Context
	deadline time.Time
}

func (c laggingDeadline) Deadline() (time.Time, bool) { return c.deadline, true }

// TestAPluginThatHonoursTheDeadlineIsATimeout: the plugin ends its call
// with its own error when the deadline (sent with the call) passes; that
// answer can arrive before the host's own timer fires, and used to be
// reported as the plugin's error instead of PLUGIN_TIMEOUT.
func TestAPluginThatHonoursTheDeadlineIsATimeout(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, execConfig(bin, `{hold_word: wait, hold_ms: 60000}`, ""))
	late, cancel := stdctx.WithTimeout(stdctx.Background(), 30*time.Second)
	defer cancel()
	ctx := laggingDeadline{late, time.Now().Add(300 * time.Millisecond)}
	err := host.CallAdmission(h, "guard", ctx, "wait")
	if !errs.HasCode(err, host.PluginTimeout) || !errors.Is(err, stdctx.DeadlineExceeded) || late.Err() != nil {
		t.Fatalf("got %v (the host's timer fired: %v)", err, late.Err())
	}
}
