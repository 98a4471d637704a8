package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// probeParent is sourced by the bash tool's own shell, whose parent is
// dsh: it writes down which of dsh's /proc entries that hold its secrets
// (environment, memory, descriptors) a child could open, and any secret it
// read. comm is readable by anyone; it proves the parent was dsh.
const probeParent = `{
  echo "comm=$(cat /proc/$PPID/comm)"
  for f in environ maps mem auxv; do
    if : < /proc/$PPID/$f 2>/dev/null; then echo "open=$f"; fi
  done
  if ls /proc/$PPID/fd >/dev/null 2>&1; then echo "open=fd"; fi
  for d in /proc/[0-9]*; do
    if [ "$(cat $d/comm 2>/dev/null)" = dsh-guard ]; then
      echo "plugin=found"
      if : < $d/environ 2>/dev/null; then echo "open=plugin-environ"; fi
      if : < $d/mem 2>/dev/null; then echo "open=plugin-mem"; fi
    fi
  done
  tr '\0' '\n' < /proc/$PPID/environ 2>/dev/null | grep TEST_PROVIDER_KEY
  echo "sandboxed=$(cat sandboxed 2>&1)"
} > report.txt
`

// runAsOrdinaryUser runs the built dsh as uid 65534 when the test is root
// (a root child passes every /proc check by its capabilities, so only an
// ordinary user's dsh can be kept out of), and as the test's user
// otherwise. It returns dsh's outcome.
func runAsOrdinaryUser(t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	bin := dshBin
	var cmd *exec.Cmd
	if os.Geteuid() == 0 {
		setpriv, err := exec.LookPath("setpriv")
		if err != nil {
			t.Fatalf("setpriv (util-linux) is needed to run dsh as an ordinary user: %v", err)
		}
		dir := openDir(t)
		bin = filepath.Join(dir, "dsh")
		data, err := os.ReadFile(dshBin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, data, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command(setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	home := openDir(t)
	cmd.Env = append(append(os.Environ(), "DSH_CONFIG=", "HOME="+home, "XDG_STATE_HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home), env...)
	var o outcome
	out, err := cmd.Output()
	o.stdout = string(out)
	if ee, ok := err.(*exec.ExitError); ok {
		o.code, o.stderr = ee.ExitCode(), string(ee.Stderr)
	} else if err != nil {
		t.Fatal(err)
	}
	return o
}

// openDir is a temp dir every user may write in, beneath directories
// every user may enter.
func openDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dsh-dumpable-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// probeDsh runs one turn whose bash call sources probeParent in a
// workspace every user may write, under preset, with dsh run's flags,
// and returns report.txt.
func probeDsh(t *testing.T, preset string, flags ...string) string {
	t.Helper()
	ws := openDir(t)
	if err := os.WriteFile(filepath.Join(ws, "probe.sh"), []byte(probeParent), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "sandboxed"), []byte("no\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgDir := openDir(t)
	cfg := filepath.Join(cfgDir, "config.yaml")
	plugin := filepath.Join(openDir(t), "dsh-guard")
	data, err := os.ReadFile(admissionPlugin(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plugin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	text := "plugins:\n  - id: no-secrets\n    exec: " + plugin + "\n    config: {word: password}\n  - use: llm.scripted\n    config:\n      replies:\n" +
		"        - tool_calls: [{name: bash, arguments: '{\"command\": \". ./probe.sh\"}'}]\n" +
		"        - text: done\n" +
		"agents:\n  - id: coder\n    provider: scripted\n    preset: " + preset + "\n    workspace: " + ws + "\nlog:\n  level: warn\n"
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	o := runAsOrdinaryUser(t, []string{"TEST_PROVIDER_KEY=sk-live-0123"}, append([]string{"run", "--config", cfg, "-p", "probe"}, flags...)...)
	report, err := os.ReadFile(filepath.Join(ws, "report.txt"))
	if o.code != 0 || err != nil {
		t.Fatalf("dsh run: exit %d, report %v\nstdout %q\nstderr %q", o.code, err, o.stdout, o.stderr)
	}
	return string(report)
}

// TestUnsandboxedChildCannotReadDshsSecrets: a child dsh starts outside
// the sandbox (bash with sandbox.mode: off, as full-access runs it; a
// hook, an MCP server, a plugin binary) runs as dsh's own user. It gets a
// minimal environment; it must not read dsh's whole one, nor dsh's memory
// or descriptors, through /proc either, nor a Go plugin's (its mTLS
// certificate, its config). dsh and the SDK mark their processes
// non-dumpable, which gives those entries to root.
func TestUnsandboxedChildCannotReadDshsSecrets(t *testing.T) {
	report := probeDsh(t, "full-access")
	if !strings.Contains(report, "comm=dsh\n") || !strings.Contains(report, "plugin=found\n") {
		t.Fatalf("the probe's parent was not dsh, or it found no plugin, so it proves nothing:\n%s", report)
	}
	if strings.Contains(report, "open=") || strings.Contains(report, "sk-live-0123") {
		t.Fatalf("a child outside the sandbox reached dsh's secrets:\n%s", report)
	}
}

// TestSandboxStillStartsForANonDumpableDsh: a non-dumpable process's
// children are root's in /proc until their execve, so an ordinary user's
// dsh cannot write a new child's uid_map; the sandbox must still start,
// with the command under the user's own uid, and see nothing of dsh.
func TestSandboxStillStartsForANonDumpableDsh(t *testing.T) {
	report := probeDsh(t, "workspace-write", "--yolo")
	// The shell is the first process of its PID namespace: it has no
	// parent there, and no /proc entry of dsh to open.
	if !strings.Contains(report, "sandboxed=no\n") || strings.Contains(report, "open=") || strings.Contains(report, "sk-live-0123") {
		t.Fatalf("the sandboxed command did not run, or reached dsh:\n%s", report)
	}
}

// admissionPlugin builds examples/plugin-admission once per test binary,
// beside dshBin (which TestMain removes).
var admissionPlugin = func() func(t *testing.T) string {
	var bin string
	return func(t *testing.T) string {
		t.Helper()
		if bin == "" {
			out := filepath.Join(filepath.Dir(dshBin), "plugin-admission")
			if b, err := exec.Command("go", "build", "-o", out, "../../examples/plugin-admission").CombinedOutput(); err != nil {
				t.Fatalf("go build examples/plugin-admission: %v\n%s", err, b)
			}
			bin = out
		}
		return bin
	}
}()
