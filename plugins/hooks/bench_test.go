package hooks_test

import (
	"bytes"
	stdctx "context"
	"encoding/json"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/dsh-go/dsh/services/tools"
)

// cpuTime is the CPU time of dsh and its reaped children so far.
func cpuTime() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// allowHook is the hook both benchmarks run: it reads its input and
// answers allow.
const allowHook = `cat >/dev/null; echo '{"hookSpecificOutput":{"permissionDecision":"allow"}}'`

// BenchmarkHookFloor is the floor: the same script started through
// childproc with the same input, its output read, and its group torn
// down, with nothing of the plugin around it.
func BenchmarkHookFloor(b *testing.B) {
	cmd := script(b, b.TempDir(), "allow.sh", allowHook)
	input := []byte(`{"session_id":"s","cwd":"/tmp","hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"make"}}`)
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		p, err := childproc.New(childproc.Spec{Path: "/bin/bash", Args: []string{"-c", cmd}})
		if err != nil {
			b.Fatal(err)
		}
		p.Cmd.Stdin = bytes.NewReader(input)
		out, err := p.Cmd.Output()
		if err != nil || !bytes.Contains(out, []byte("allow")) {
			b.Fatalf("%q %v", out, err)
		}
		p.Stop(time.Second)
	}
	reportCPU(b, start)
}

// BenchmarkPreToolUseHook is one tools/approve with one PreToolUse hook
// running the same script: the floor plus the plugin's work (input,
// pipes, timer, reading the answer, the verdict).
func BenchmarkPreToolUseHook(b *testing.B) {
	r := newRig(b)
	r.preToolUse(hook("Bash", r.script("allow.sh", allowHook), 0))
	svc, _ := tools.Key.Get(r.h.Root())
	a := r.agent("main")
	call := tools.Call{AgentID: "main", Name: "bash", Arguments: json.RawMessage(`{"command":"make"}`), Workspace: r.ws}
	tool := svc.Lookup(a.Context(), "bash")
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		v, err := tools.EventApprove.Dispatch(stdctx.Background(), a.Context(), tools.Approval{Call: call, Tool: tool})
		if err != nil || v.Decision != tools.Allow {
			b.Fatalf("%+v %v", v, err)
		}
	}
	reportCPU(b, start)
}
