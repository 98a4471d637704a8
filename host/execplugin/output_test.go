package execplugin_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// waitLogLine waits for a line of logs holding every one of want.
func waitLogLine(t *testing.T, logs *logBuffer, want ...string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		for _, line := range strings.Split(logs.String(), "\n") {
			all := true
			for _, w := range want {
				all = all && strings.Contains(line, w)
			}
			if all {
				return line
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line holds %q:\n%s", want, logs.String())
		}
	}
}

// TestAGoPluginsOutputReachesTheLog: what a Go plugin prints to stdout and
// stderr after its handshake is logged at info under its entry's id.
func TestAGoPluginsOutputReachesTheLog(t *testing.T) {
	bin, _ := binaries(t)
	h, logs := startExec(t, execConfig(bin, `{print_word: debug}`, ""))
	if _, err := send(h, stdctx.Background(), "main", "debug me"); err != nil {
		t.Fatal(err)
	}
	waitLogLine(t, logs, "[INFO]", "exec:guard", "stream=stdout", `"to stdout: debug me"`)
	waitLogLine(t, logs, "[INFO]", "exec:guard", "stream=stderr", `"to stderr: debug me"`)
}

const printScript = `
import sys
from dsh_plugin import Plugin

plugin = Plugin("printer", "1.0.0")

@plugin.tool("shout", "Prints, then answers.")
def shout(args, ctx):
    print("debugging from python", flush=True)
    return "ok"

plugin.serve()
`

// TestAPythonPluginsStdoutReachesTheLog: a Python plugin's print() after
// the handshake, on its real stdout, is logged under its entry's id, and
// the handshake line is not.
func TestAPythonPluginsStdoutReachesTheLog(t *testing.T) {
	requirePython(t)
	script := filepath.Join(t.TempDir(), "plugin.py")
	if err := os.WriteFile(script, []byte(printScript), 0o644); err != nil {
		t.Fatal(err)
	}
	got, logs := toolTurnLogs(t, pythonEntry(t, "printer", script, "{}"), "shout", "{}")
	if got[0] != "ok" {
		t.Fatalf("tool result: %q", got)
	}
	waitLogLine(t, logs, "[INFO]", "exec:printer", "stream=stdout", `"debugging from python"`)
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "plugin output") && strings.Contains(line, "|grpc|") {
			t.Fatalf("the handshake line was logged as output: %s", line)
		}
	}
}
