package execplugin_test

import (
	stdctx "context"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

// TestCallsRightAfterACrashAreUnavailable: only the call in flight
// crashed with the plugin. Calls made after it died but before the host
// noticed — they cannot even connect — are "unavailable", as documented,
// and never "crashed during the call".
func TestCallsRightAfterACrashAreUnavailable(t *testing.T) {
	bin := toolPlugin(t)
	h, logs := startExec(t, toolConfig(bin, "{}", "    max_restarts: -1\n", ""))
	callTool(t, h, "main", "crash", "")
	for i := 0; i < 20; i++ {
		r := callTool(t, h, "main", "echo", `{"text":"x"}`)
		if !r.IsError || !strings.Contains(r.Content, `The tool "echo" is unavailable`) || strings.Contains(r.Content, "during the call") {
			t.Fatalf("call %d after the crash: %+v\n%s", i, r, logs.String())
		}
	}
}

// TestAdmissionRightAfterACrashIsUnavailable: the same for a waterfall:
// the refusal carries PLUGIN_CRASHED with reason host/plugin-unavailable.
func TestAdmissionRightAfterACrashIsUnavailable(t *testing.T) {
	bin, _ := binaries(t)
	h, logs := startExec(t, execConfig(bin, `{crash_word: boom}`, "    max_restarts: -1\n"))
	send(h, stdctx.Background(), "main", "boom")
	for i := 0; i < 20; i++ {
		_, err := send(h, stdctx.Background(), "main", "after")
		ref, ok := agentcontroller.RefusalOf(err)
		if !ok || ref.Reason != execplugin.ReasonUnavailable && ref.Reason != execplugin.ReasonGivenUp || strings.Contains(err.Error(), "during the call") {
			t.Fatalf("message %d after the crash: %v\n%s", i, err, logs.String())
		}
	}
}
