package hooks_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
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
	if alive(pid) {
		t.Fatalf("the hook's process %d outlived the cancel", pid)
	}
}
