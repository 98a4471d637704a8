package hooks_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/tools"
)

// TestACancelledCallKillsItsHooks: the call's context ends while a hook
// runs (the turn was cancelled); the stage returns at once and the hook's
// group is gone.
func TestACancelledCallKillsItsHooks(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(r.dir, "pid")
	r.preToolUse(hook("", r.script("hang.sh", `sleep 300 & echo $! > `+pidFile+`.tmp; mv `+pidFile+`.tmp `+pidFile+`; wait`), 0))
	svc, _ := tools.Key.Get(r.h.Root())
	a := r.agent("main")
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	done := make(chan error, 1)
	go func() {
		call := tools.Call{AgentID: "main", Name: "bash", Arguments: json.RawMessage(`{"command":"make"}`), Workspace: r.ws}
		_, err := tools.EventApprove.Dispatch(ctx, a.Context(), tools.Approval{Call: call, Tool: svc.Lookup(a.Context(), "bash")})
		done <- err
	}()
	var pid int
	deadline := time.Now().Add(10 * time.Second)
	for pid == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the hook never started")
		}
		if data, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(data)))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a cancelled approval returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the approval did not return after cancel")
	}
	if !goneSoon(pid) {
		t.Fatalf("the hook's process %d outlived the cancel", pid)
	}
}

// TestAnEscapedProcessDoesNotHoldTheStage: a hook whose child left its
// process group (setsid) and keeps its output open still answers, within
// the bounded wait for its output.
func TestAnEscapedProcessDoesNotHoldTheStage(t *testing.T) {
	r := newRig(t)
	pidFile := filepath.Join(r.dir, "pid")
	r.preToolUse(hook("", r.script("escape.sh", `setsid sh -c 'echo $$ > `+pidFile+`.tmp; mv `+pidFile+`.tmp `+pidFile+`; exec sleep 60' &
# once the pid is written the child has left the group
while [ ! -e `+pidFile+` ]; do sleep 0.01; done
echo "denied anyway" >&2; exit 2`), 0))
	t.Cleanup(func() {
		if data, err := os.ReadFile(pidFile); err == nil {
			if pid, _ := strconv.Atoi(strings.TrimSpace(string(data))); pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	start := time.Now()
	v := r.approve("main", "bash", `{"command":"make"}`)
	if v.Decision != tools.Deny || v.Reason != "denied anyway" {
		t.Fatalf("got %+v", v)
	}
	data, _ := os.ReadFile(pidFile)
	if pid, _ := strconv.Atoi(strings.TrimSpace(string(data))); !alive(pid) {
		t.Fatalf("the escaped process %d is gone; the test did not test the escape", pid)
	}
	if took := time.Since(start); took > 30*time.Second { // killGrace is 2s; 30s leaves room for a loaded machine
		t.Fatalf("the stage waited %s for a process outside the hook's group", took)
	}
}
