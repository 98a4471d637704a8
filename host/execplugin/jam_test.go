package execplugin_test

import (
	stdctx "context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/execplugin"
)

// TestPythonPluginCannotJam: 33 admission calls hang for good in a Python
// plugin serving 32 at once. The 33rd is refused at once as PLUGIN_BUSY,
// not queued until it times out; an admission sent then is answered well
// within the call timeout; and once the host has given up on every hung
// call the plugin reports NOT_SERVING and is restarted, and serves again.
func TestPythonPluginCannotJam(t *testing.T) {
	requirePython(t)
	yaml := "plugins:\n  - use: llm.scripted\n" +
		pythonEntry(t, "jam", "testdata/python-jam/plugin.py", "{}") +
		"    timeout: 2s\n    health_interval: 1h\n    health_timeout: 1s\n" +
		"agents:\n  - id: main\n    provider: scripted\n"
	h, logs := startExec(t, yaml)
	p, _ := h.ExecPlugin("jam")
	old := execplugin.PID(p)
	const calls = 33
	results := make(chan error, calls)
	var wg sync.WaitGroup
	for range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- execplugin.CallAdmission(p, stdctx.Background(), "hang")
		}()
	}
	first := <-results
	if !errs.Has(first, execplugin.PluginBusy, execplugin.ReasonBusy) || !strings.Contains(first.Error(), "all 32 of its workers are busy") {
		t.Fatalf("the first answer of 33 hanging calls must be the 33rd's refusal, PLUGIN_BUSY naming the limit: %v\n%s", first, logs.String())
	}
	began := time.Now()
	_, err := send(h, stdctx.Background(), "main", "hello")
	took := time.Since(began)
	if took > time.Second || !(errs.HasCode(err, execplugin.PluginBusy) || errs.HasCode(err, execplugin.PluginUnhealthy)) {
		t.Fatalf("an admission to a full plugin must be refused at once (busy, or unhealthy while restarted); took %s: %v\n%s", took, err, logs.String())
	}
	t.Logf("admission to a full plugin answered in %s: %v", took, err)
	wg.Wait()
	close(results)
	for err := range results {
		if !errs.HasCode(err, execplugin.PluginTimeout) {
			t.Fatalf("a hung call ends with its timeout: %v", err)
		}
	}
	timedOut := time.Now()
	deadline := timedOut.Add(20 * time.Second)
	for {
		_, err := send(h, stdctx.Background(), "main", "hello")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the jammed plugin was not restarted: %v\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if execplugin.PID(p) == old || !strings.Contains(logs.String(), "answered its health check with NOT_SERVING") {
		t.Fatalf("the plugin must have been restarted for reporting NOT_SERVING:\n%s", logs.String())
	}
	t.Logf("serving again %s after the hung calls timed out", time.Since(timedOut))
}
