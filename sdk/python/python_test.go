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
	t.Skipf("python3 with %s is not installed (apt-get install python3-grpcio python3-protobuf python3-cryptography python3-venv python3-pip python3-setuptools): %s", modules, out)
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

// TestInstall installs the package as its README says, offline, into a
// venv that sees Debian's grpcio, protobuf and cryptography, and imports
// it from there.
func TestInstall(t *testing.T) {
	requirePython(t, "grpc, google.protobuf, cryptography, setuptools, venv, pip")
	tmp := t.TempDir()
	// A copy: setuptools writes build/ and *.egg-info beside the sources.
	src := filepath.Join(tmp, "src")
	run(t, ".", "cp", "-r", ".", src)
	venv := filepath.Join(tmp, "venv")
	run(t, tmp, python, "-m", "venv", "--system-site-packages", venv)
	run(t, tmp, filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index", "--quiet", src)
	out := run(t, tmp, filepath.Join(venv, "bin", "python"), "-c",
		"import dsh_plugin, dsh_plugin.proto.plugin_pb2 as pb; print(dsh_plugin.__file__); print(pb.ToolDecl(name='x').name)")
	lines := strings.Fields(out)
	if len(lines) != 2 || !strings.HasPrefix(lines[0], venv) || lines[1] != "x" {
		t.Fatalf("the installed package must import from the venv: %q", out)
	}
}
