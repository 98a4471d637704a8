package execplugin_test

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/host/execplugin"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/hashicorp/go-hclog"
)

// TestPinnedScriptChangedIsRefused: a Python plugin's sha256 would cover
// the interpreter; pin: covers the script. A pinned script runs while it
// matches; once changed, a restart of the running plugin and a new start
// are both refused, naming the file.
func TestPinnedScriptChangedIsRefused(t *testing.T) {
	requirePython(t)
	src, err := os.ReadFile("../../examples/python-admission/plugin.py")
	if err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "plugin.py")
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	yaml := "plugins:\n  - use: llm.scripted\n" +
		pythonEntry(t, "no-secrets", script, `{word: password}`) +
		fmt.Sprintf("    pin:\n      - file: %s\n        sha256: %s\n", script, hex.EncodeToString(sum[:])) +
		"agents:\n  - id: main\n    provider: scripted\n"
	h, logs := startExec(t, yaml)
	if _, err := send(h, stdctx.Background(), "main", "my password"); !agentcontroller.IsRejected(err) {
		t.Fatalf("the pinned script runs and refuses: %v\n%s", err, logs.String())
	}
	// One changed line, as an agent or an attacker would make it.
	if err := os.WriteFile(script, append(src, []byte("\nword = ''\n")...), 0o644); err != nil {
		t.Fatal(err)
	}
	p, _ := h.ExecPlugin("no-secrets")
	syscall.Kill(execplugin.PID(p), syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "pinned file "+script+" has sha256") {
		if time.Now().After(deadline) {
			t.Fatalf("the restart of a plugin whose script changed must be refused, naming the file:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := send(h, stdctx.Background(), "main", "my password"); !agentcontroller.IsRejected(err) || !strings.Contains(err.Error(), execplugin.ReasonUnavailable) {
		t.Fatalf("while the changed script is refused, admission fails closed: %v", err)
	}
	cfg, err := config.Parse("exec.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h2, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err == nil {
		h2.Close(stdctx.Background())
		t.Fatal("a changed pinned script must refuse the start")
	}
	if !errs.HasCode(err, execplugin.PluginStartFailed) || !strings.Contains(err.Error(), "update its sha256 under pin:") || !strings.Contains(err.Error(), script) {
		t.Fatalf("the refusal must name the file and the fix: %v", err)
	}
}

// TestSHA256OnAnInterpreterWarnsOfTheScript: pinning only the interpreter
// of a script plugin is most likely a mistake, and said so.
func TestSHA256OnAnInterpreterWarnsOfTheScript(t *testing.T) {
	requirePython(t)
	sum, err := os.ReadFile("/usr/bin/python3")
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(sum)
	script, _ := filepath.Abs("../../examples/python-admission/plugin.py")
	yaml := "plugins:\n  - use: llm.scripted\n" +
		pythonEntry(t, "no-secrets", script, `{word: password}`) +
		fmt.Sprintf("    sha256: %s\n", hex.EncodeToString(s[:])) +
		"agents:\n  - id: main\n    provider: scripted\n"
	_, logs := startExec(t, yaml)
	if !strings.Contains(logs.String(), "not "+script+" it runs; list the script under pin:") {
		t.Fatalf("no warning that the script is unpinned:\n%s", logs.String())
	}
}
