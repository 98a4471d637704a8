package execplugin_test

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/hashicorp/go-hclog"
)

// streamChunks is the answer of BenchmarkStreamChunks, in chunks.
const streamChunks = 2000

// BenchmarkStreamChunks streams a 2,000-chunk answer (one chunk a word,
// 200 µs apart: faster than any model, so the sender is never idle for
// long) to a plugin that listens to agent/stream-chunk: "batched" as every
// Go plugin is served (batches on its Mux stream), "batched-rpc" as a
// plugin without mux (an EmitBatch RPC each), "single" as a binary without
// emit-batch, and
// "no-plugin" as the floor. It reports the notification messages per
// answer and the CPU time of the host and the plugin per answer.
func BenchmarkStreamChunks(b *testing.B) {
	for _, mode := range []string{"no-plugin", "idle-plugin", "single", "batched-rpc", "batched"} {
		b.Run(mode, func(b *testing.B) { benchStream(b, mode) })
	}
}

func benchStream(b *testing.B, mode string) {
	bin, _ := binaries(&testing.T{})
	file := filepath.Join(b.TempDir(), "counts")
	entry := ""
	switch mode {
	case "no-plugin":
	case "idle-plugin":
		// Connected, listening to nothing the answer sends: the cost of a
		// plugin over the wall time of a stream, without the stream.
		entry = fmt.Sprintf("  - id: listener\n    exec: %s\n    env: {TESTPLUGIN_POLICY: \"1\"}\n", bin)
	default:
		old := ""
		switch mode {
		case "single":
			old = `, TESTPLUGIN_OLD: "1"`
		case "batched-rpc":
			old = `, TESTPLUGIN_NO_MUX: "1"`
		}
		entry = fmt.Sprintf("  - id: listener\n    exec: %s\n    env: {TESTPLUGIN_COUNT: %q%s}\n", bin, file, old)
	}
	cfg, err := config.Parse("bench.yaml", []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      delay: 200us
      replies: [{text: "%s"}]
%sagents:
  - id: main
    provider: scripted
`, streamedAnswer(streamChunks-1), entry)), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close(stdctx.Background())
	pid := 0
	if p, ok := h.ExecPlugin("listener"); ok {
		if pid = execplugin.PID(p); pid == 0 {
			b.Fatal("the plugin's process id is unknown")
		}
	}
	counted := pid != 0 && mode != "idle-plugin"
	a, _ := h.Agent("main")
	var messages, chunks int
	hostCPU, pluginCPU := processCPU(0), processCPU(pid)
	answers := 0
	for b.Loop() {
		if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: "talk"}); err != nil {
			b.Fatal(err)
		}
		a.WhenIdle(stdctx.Background())
		answers++
		if !counted {
			continue
		}
		m, c := waitCounts(b, file, answers)
		messages += m
		chunks += c
	}
	b.ReportMetric(float64((processCPU(0)-hostCPU).Microseconds())/float64(answers)/1000, "host-cpu-ms/answer")
	if pid != 0 {
		b.ReportMetric(float64((processCPU(pid)-pluginCPU).Microseconds())/float64(answers)/1000, "plugin-cpu-ms/answer")
	}
	if counted {
		b.ReportMetric(float64(messages)/float64(answers), "messages/answer")
		b.ReportMetric(float64(chunks)/float64(answers), "chunks/answer")
	}
}

// waitCounts waits for the plugin's line of answer n and returns it.
func waitCounts(b *testing.B, file string, n int) (messages, chunks int) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, _ := os.ReadFile(file)
		if lines := strings.Split(strings.TrimSpace(string(raw)), "\n"); len(lines) >= n && lines[0] != "" {
			fmt.Sscanf(lines[n-1], "%d %d", &messages, &chunks)
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("the plugin never heard the end of answer %d", n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
