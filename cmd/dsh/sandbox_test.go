package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/sandbox"
)

const sandboxTestConfig = `
plugins:
  - use: llm.scripted
presets:
  locked:
    - use: tools.bash
      config: {sandbox: {unavailable: refuse}}
  open:
    - use: tools.bash
      config: {sandbox: {mode: "off"}}
agents:
  - id: locked
    provider: scripted
    preset: locked
  - id: open
    provider: scripted
    preset: open
  - id: talker
    provider: scripted
`

// TestSandboxReportSaysWhatIsInForce: config check names, per agent with
// bash, the sandbox this kernel gives it, in tools.bash's own words.
func TestSandboxReportSaysWhatIsInForce(t *testing.T) {
	cfg, err := config.Parse("sb.yaml", []byte(sandboxTestConfig), config.LoadOptions{Environ: []string{}, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	got := describeSandbox(cfg)
	locked := "  locked: sandbox: namespaces ("
	if st := sandbox.Probe(); !st.Available() || !st.Namespaces {
		locked = "  locked: sandbox unavailable, every command is refused"
	}
	for _, want := range []string{"bash sandbox:\n", locked, "  open: sandbox off (sandbox.mode: off)"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "talker") {
		t.Errorf("an agent without bash is reported:\n%s", got)
	}
}

func TestSandboxReportWithoutBash(t *testing.T) {
	cfg, err := config.Parse("x.yaml", []byte("plugins:\n  - use: llm.scripted\nagents:\n  - id: a\n    provider: scripted\n"), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if got := describeSandbox(cfg); got != "bash sandbox: no agent has the bash tool\n" {
		t.Fatalf("got %q", got)
	}
}

// TestBuiltinPresetsPassConfigCheck: dsh config check validates the modes
// like any preset, and shows each agent's workspace and its bash sandbox.
func TestBuiltinPresetsPassConfigCheck(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("plugins:\n  - use: llm.scripted\nagents:\n")
	for _, p := range config.BuiltinPresets() {
		b.WriteString("  - id: " + p.Name + "\n    provider: scripted\n    preset: " + p.Name + "\n    workspace: " + dir + "\n")
	}
	path := filepath.Join(dir, "modes.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := execute([]string{"config", "check", "--config", path}, strings.NewReader(""), &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"read-only (built-in):\n    tools.files\n    tools.permission\n",
		"workspace-write (built-in):\n    tools.files\n    tools.bash\n    tools.web\n    tools.permission\n",
		"  read-only  provider=scripted presets=read-only\n    workspace " + dir + "\n",
		"  workspace-write: sandbox: ",
		"  full-access: sandbox off",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("config check lacks %q:\n%s", want, out.String())
		}
	}
}

func TestPresetsCommandListsTheModes(t *testing.T) {
	var out, errb bytes.Buffer
	if code := execute([]string{"presets"}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{
		"read-only  read, list, glob and grep",
		"    - use: tools.files  config: {tools: [read, list, glob, grep]}\n    - use: tools.permission  config: {mode: read-only}\n",
		"    - use: tools.bash  config: {jobs: {enabled: true}, sandbox: {mode: off}}\n",
		"    - use: tools.bash  config: {jobs: {enabled: true}}\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("dsh presets lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	execute([]string{"plugins"}, strings.NewReader(""), &out, &errb)
	if !strings.Contains(out.String(), "built-in presets (dsh presets shows what they mount): read-only, workspace-write, full-access") {
		t.Errorf("dsh plugins must point at the presets:\n%s", out.String())
	}
}
