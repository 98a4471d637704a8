package execplugin_test

import (
	stdctx "context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
)

// TestAnOptionalPluginThatFailsToStart: dsh starts without it, logs why
// at warn naming it, and messages reach the agent.
func TestAnOptionalPluginThatFailsToStart(t *testing.T) {
	bin, _ := binaries(t)
	h, logs := startExec(t, execConfig(bin, `{refuse_word: spam}`, "    optional: true\n    env: {TESTPLUGIN_EXIT: \"1\"}\n"))
	waitLogLine(t, logs, "[WARN]", `"guard"`, "optional and failed to start")
	// The error may span lines; it follows the warning.
	if out := logs.String(); !strings.Contains(out, "exited without a handshake") || !strings.Contains(out, "leaving before the handshake") {
		t.Fatalf("the warning does not say why, with the plugin's stderr:\n%s", out)
	}
	if _, err := send(h, stdctx.Background(), "main", "spam"); err != nil {
		t.Fatalf("without the optional plugin, messages pass: %v", err)
	}
}

// TestAnOptionalPluginWhoseBinaryIsMissing: the config is accepted, dsh
// config check's tree marks the entry, and dsh starts.
func TestAnOptionalPluginWhoseBinaryIsMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "not-built-yet")
	yaml := execConfig(missing, "{}", "    optional: true\n")
	cfg, err := config.Parse("exec.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatalf("an optional entry's missing binary is not a config problem: %v", err)
	}
	if tree := host.Describe(cfg); !strings.Contains(tree, "[optional: dsh starts without it if it fails to start; its binary is missing, so it will]") {
		t.Fatalf("dsh config check does not say the entry is optional and missing:\n%s", tree)
	}
	_, logs := startExec(t, yaml)
	waitLogLine(t, logs, "[WARN]", `"guard"`, "optional and failed to start")
	if !strings.Contains(logs.String(), "missing or not executable") {
		t.Fatalf("the warning does not say why:\n%s", logs.String())
	}
	// Without optional, the same entry is a config problem, as before.
	if _, err := config.Parse("exec.yaml", []byte(execConfig(missing, "{}", "")), config.LoadOptions{Environ: []string{}}); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("a required entry's missing binary: %v", err)
	}
}

// TestACallTimeoutNamesTheSetting: the message says which setting bounded
// the call and how to change it.
func TestACallTimeoutNamesTheSetting(t *testing.T) {
	bin, _ := binaries(t)
	h, _ := startExec(t, execConfig(bin, `{hold_word: wait, hold_ms: 60000}`, "    timeout: 100ms\n"))
	_, err := send(h, stdctx.Background(), "main", "wait")
	if !errs.HasCode(err, execplugin.PluginTimeout) || !strings.Contains(err.Error(), "did not answer within 100ms, its entry's timeout; raise timeout: in the entry, or fix the plugin") {
		t.Fatalf("got %v", err)
	}
}
