// Package python holds the Go side of the Python SDK's tests: go test
// ./... runs the SDK's unit tests and installs the package into a fresh
// virtual environment, so CI holds the SDK like any Go package.
package python

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const python = "/usr/bin/python3"

// requirePython skips without Debian's Python modules the SDK needs;
// .ci/run installs them, so in CI a missing one fails instead.
func requirePython(t *testing.T, modules string) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import "+modules).CombinedOutput()
	if err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("CI must have python3 with %s (.ci/run installs them): %v\n%s", modules, err, out)
	}
	t.Skipf("python3 with %s is not installed (apt-get install python3-grpcio python3-protobuf python3-cryptography python3-venv python3-pip python3-setuptools python3-wheel): %s", modules, out)
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestUnit runs the SDK's unittest suite (tests/): every RPC of the
// protocol over real gRPC, the handshake and AutoMTLS against a real
// plugin process, the host pipe, logging.
func TestUnit(t *testing.T) {
	requirePython(t, "grpc, google.protobuf, cryptography")
	out := run(t, "tests", python, "-m", "unittest", "discover", "-s", ".", "-v")
	if !strings.Contains(out, "\nOK") {
		t.Fatalf("unittest did not end OK:\n%s", out)
	}
}

// TestWheelsAndConsoleScript is the packaging path of the docs, offline,
// with Debian's toolchain (python3-venv, python3-pip, python3-setuptools,
// python3-wheel): it builds wheels of the SDK and of examples/python-tool,
// installs the example's wheel into a venv that sees Debian's grpcio,
// protobuf and cryptography, and checks its console script and that the
// example's own tests pass against the installed packages.
func TestWheelsAndConsoleScript(t *testing.T) {
	requirePython(t, "grpc, google.protobuf, cryptography, setuptools, venv, pip, wheel")
	tmp := t.TempDir()
	// Copies: setuptools writes build/ and *.egg-info beside the sources.
	sdk, example := filepath.Join(tmp, "sdk"), filepath.Join(tmp, "python-tool")
	run(t, ".", "cp", "-r", ".", sdk)
	run(t, ".", "cp", "-r", "../../examples/python-tool", example)
	venv := filepath.Join(tmp, "venv")
	run(t, tmp, python, "-m", "venv", "--system-site-packages", venv)
	pip := filepath.Join(venv, "bin", "pip")
	dist := filepath.Join(tmp, "dist")
	run(t, tmp, pip, "wheel", "--no-build-isolation", "--no-index", "--no-deps", "--quiet", "-w", dist, sdk, example)
	for _, whl := range []string{"dsh_plugin-0.1.0-py3-none-any.whl", "dsh_file_stats-1.0.0-py3-none-any.whl"} {
		if _, err := os.Stat(filepath.Join(dist, whl)); err != nil {
			t.Fatalf("no wheel %s: %v", whl, err)
		}
	}
	// The example's wheel brings the SDK's as its dependency.
	run(t, tmp, pip, "install", "--no-index", "--find-links", dist, "--quiet", "dsh-file-stats")
	out := run(t, tmp, filepath.Join(venv, "bin", "python"), "-c",
		"import dsh_plugin, dsh_file_stats; print(dsh_plugin.__file__); print(dsh_file_stats.__file__)")
	for _, f := range strings.Fields(out) {
		if !strings.HasPrefix(f, venv) {
			t.Fatalf("the packages must import from the venv: %q", out)
		}
	}
	// Run by hand rather than by dsh, the console script says what it is.
	cmd := exec.Command(filepath.Join(venv, "bin", "dsh-file-stats"))
	b, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 || !strings.Contains(string(b), "mount it with exec:") {
		t.Fatalf("dsh-file-stats run by hand: %v\n%s", err, b)
	}
	// The console script, as dsh will run it, through the harness.
	out = run(t, tmp, filepath.Join(venv, "bin", "python"), "-c",
		"import sys; from dsh_plugin.testing import PluginHarness\n"+
			"with PluginHarness.child([sys.argv[1]]) as h: print(h.tools(), h.health())", filepath.Join(venv, "bin", "dsh-file-stats"))
	if !strings.Contains(out, "['file_stats'] SERVING") {
		t.Fatalf("the console script through the harness: %q", out)
	}
	// The example's tests against the installed packages: the module is
	// removed from the copy, so the installed one is what they import.
	os.Remove(filepath.Join(example, "dsh_file_stats.py"))
	out = run(t, example, filepath.Join(venv, "bin", "python"), "-m", "unittest", "-v")
	if !strings.Contains(out, "Ran 3 tests") || !strings.Contains(out, "\nOK") {
		t.Fatalf("the example's tests did not pass against the installed packages:\n%s", out)
	}
}

// TestExamples runs the Python examples' own tests (examples/python-*),
// which drive each plugin through the real protocol with
// dsh_plugin.testing, in process and as a child process.
func TestExamples(t *testing.T) {
	requirePython(t, "grpc, google.protobuf, cryptography")
	sdk, _ := filepath.Abs(".")
	for _, dir := range []string{"../../examples/python-tool", "../../examples/python-admission"} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		cmd := exec.CommandContext(ctx, python, "-m", "unittest", "-v")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PYTHONPATH="+sdk, "PYTHONDONTWRITEBYTECODE=1")
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil || !strings.Contains(string(out), "\nOK") || strings.Contains(string(out), "Ran 0 tests") {
			t.Fatalf("%s: %v\n%s", dir, err, out)
		}
	}
}
