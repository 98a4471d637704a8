package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/plugin"
	"github.com/hashicorp/go-hclog"
)

// fakeFiles and fakeBash stand in for tools.files and tools.bash in a test
// binary that does not link them yet, with the config keys the branches
// agreed on. Once they are linked in, the real ones are used.
type fakeFiles struct {
	Tools []string `koanf:"tools"`
}

type fakeBash struct {
	Sandbox struct {
		Mode        string `koanf:"mode"`
		Network     bool   `koanf:"network"`
		Unavailable string `koanf:"unavailable"`
	} `koanf:"sandbox"`
}

func registerMissingTools() {
	if _, ok := plugin.Lookup("tools.files"); !ok {
		plugin.Register("tools.files", "test stand-in", func(*dshctx.Context, fakeFiles) error { return nil })
	}
	if _, ok := plugin.Lookup("tools.bash"); !ok {
		plugin.Register("tools.bash", "test stand-in", func(*dshctx.Context, fakeBash) error { return nil })
	}
}

const sandboxTestConfig = `
plugins:
  - use: llm.scripted
presets:
  locked:
    - use: tools.bash
      config: {sandbox: {unavailable: refuse}}
  lenient:
    - use: tools.bash
      config: {sandbox: {mode: landlock, unavailable: warn, network: true}}
  open:
    - use: tools.bash
      config: {sandbox: {mode: "off"}}
agents:
  - id: locked
    provider: scripted
    preset: locked
  - id: lenient
    provider: scripted
    preset: lenient
  - id: open
    provider: scripted
    preset: open
  - id: talker
    provider: scripted
`

func parseSandboxConfig(t *testing.T, dir string) *config.Config {
	t.Helper()
	registerMissingTools()
	cfg, err := config.Parse("sb.yaml", []byte(sandboxTestConfig), config.LoadOptions{Environ: []string{}, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func withProbe(t *testing.T, st landlockStatus) *int {
	calls := new(int)
	old := probeSandbox
	probeSandbox = func() landlockStatus { *calls++; return st }
	t.Cleanup(func() { probeSandbox = old })
	return calls
}

func TestSandboxReportSaysWhatIsInForce(t *testing.T) {
	dir := t.TempDir()
	cfg := parseSandboxConfig(t, dir)

	calls := withProbe(t, landlockStatus{ABI: 4})
	got := describeSandbox(cfg)
	want := "bash sandbox:\n" +
		"  locked: landlock ABI 4: writes only in " + dir + " and the temp dir, network off\n" +
		"  lenient: landlock ABI 4: writes only in " + dir + " and the temp dir, network on\n" +
		"  open: off: bash runs unconfined (sandbox: {mode: off})\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if *calls != 1 {
		t.Fatalf("the kernel was probed %d times; once is enough", *calls)
	}

	withProbe(t, landlockStatus{Why: "kernel 5.4 has no Landlock"})
	report := sandboxReport(cfg)
	if len(report) != 3 || !report[0].degraded || !report[1].degraded || report[2].degraded {
		t.Fatalf("report %+v", report)
	}
	if want := "landlock unavailable (kernel 5.4 has no Landlock) → refuse: bash calls fail"; !strings.HasPrefix(report[0].text, want) {
		t.Fatalf("refuse: %q", report[0].text)
	}
	if want := "landlock unavailable (kernel 5.4 has no Landlock) → warn: bash runs unconfined, with a warning"; report[1].text != want {
		t.Fatalf("warn: %q", report[1].text)
	}

	// dsh run logs it: a degraded sandbox as a warning.
	var logs bytes.Buffer
	logSandbox(hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info}), cfg)
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "[WARN]") || !strings.Contains(lines[0], "agent=locked") || !strings.Contains(lines[2], "[INFO]") || !strings.Contains(lines[2], "agent=open") {
		t.Fatalf("logs:\n%s", logs.String())
	}
}

func TestSandboxReportWithoutBash(t *testing.T) {
	withProbe(t, landlockStatus{ABI: 1})
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
// It needs tools.permission's mode key (the policy branch) to pass.
func TestBuiltinPresetsPassConfigCheck(t *testing.T) {
	registerMissingTools()
	withProbe(t, landlockStatus{ABI: 3})
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
		"workspace-write (built-in):\n    tools.files\n    tools.bash\n    tools.permission\n",
		"  read-only  provider=scripted presets=read-only\n    workspace " + dir + "\n",
		"  workspace-write: landlock ABI 3: writes only in " + dir,
		"  full-access: off: bash runs unconfined",
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
		"    - use: tools.bash  config: {sandbox: {mode: off}}\n",
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
