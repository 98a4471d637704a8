//go:build linux

package checkpoints_test

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// BenchmarkEditStep is the step of the issue: an edit of one file in a
// 10,000-file workspace, through the tools service as a step runs it,
// without checkpoints (off, the floor) and with them (on). The edit
// checkpoint covers the edited path alone, so the workspace's size should
// not show.
func BenchmarkEditStep(b *testing.B) {
	ws := workspace(b, 10000)
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			r := newRig(b, ws, on, "")
			olds := [2]string{"file 05000", "FILE 05000"}
			i := 0
			measure(b, func() {
				args, _ := json.Marshal(map[string]string{"path": "d050/f05000.txt", "old": olds[i%2], "new": olds[(i+1)%2]})
				r.call(b, "edit", string(args))
				i++
			})
		})
	}
}

// BenchmarkBashStep is a bash step that rewrites 100 files of the same
// 10,000-file workspace, in the sandbox: the checkpoint walks the
// workspace before and after the command (stat only, but for what
// changed) and stores the 100 new contents.
func BenchmarkBashStep(b *testing.B) {
	if st := sandbox.Probe(); !st.Available() || !st.Namespaces {
		b.Skipf("no sandbox on this kernel: %s", st)
	}
	ws := workspace(b, 10000)
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			r := newRig(b, ws, on, "")
			i := 0
			measure(b, func() {
				cmd := fmt.Sprintf(`for f in d007/*.txt; do echo %d > "$f"; done`, i)
				args, _ := json.Marshal(map[string]string{"command": cmd})
				r.call(b, "bash", string(args))
				i++
			})
		})
	}
}

// measure runs op b.N times and reports, beside wall time, the CPU time
// of dsh and its children (the sandboxed shell) per op.
func measure(b *testing.B, op func()) {
	b.ReportAllocs()
	cpu := func() time.Duration {
		var self, kids syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
		_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
		return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
	}
	before := cpu()
	n := 0
	for b.Loop() {
		op()
		n++
	}
	b.ReportMetric(float64(cpu()-before)/float64(n)/1e6, "cpu-ms/op")
}

// BenchmarkEditTurn is a whole turn as the agent loop runs it, with the
// zero-latency scripted model and the session.jsonl store: a step that
// edits one file of the 10,000-file workspace, then the answer's step,
// each synced to the log. This is the step's time the checkpoint adds to.
func BenchmarkEditTurn(b *testing.B) {
	ws := workspace(b, 10000)
	edit := func(old, new string) scripted.Reply {
		return scripted.Reply{ToolCalls: []scripted.Call{call("edit", map[string]string{"path": "d050/f05000.txt", "old": old, "new": new})}}
	}
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			r := newRig(b, ws, on, "", edit("file 05000", "FILE 05000"), scripted.Reply{Text: "done"},
				edit("FILE 05000", "file 05000"), scripted.Reply{Text: "done"})
			measure(b, func() { r.prompt(b, "edit") })
		})
	}
}

// BenchmarkBashTurn is BenchmarkEditTurn with a sandboxed bash command
// that rewrites 100 files instead of the edit.
func BenchmarkBashTurn(b *testing.B) {
	if st := sandbox.Probe(); !st.Available() || !st.Namespaces {
		b.Skipf("no sandbox on this kernel: %s", st)
	}
	ws := workspace(b, 10000)
	bash := func(n int) scripted.Reply {
		return scripted.Reply{ToolCalls: []scripted.Call{call("bash", map[string]string{"command": fmt.Sprintf(`for f in d007/*.txt; do echo %d > "$f"; done`, n)})}}
	}
	for _, on := range []bool{false, true} {
		b.Run(map[bool]string{false: "off", true: "on"}[on], func(b *testing.B) {
			r := newRig(b, ws, on, "", bash(1), scripted.Reply{Text: "done"}, bash(2), scripted.Reply{Text: "done"})
			measure(b, func() { r.prompt(b, "run") })
		})
	}
}
