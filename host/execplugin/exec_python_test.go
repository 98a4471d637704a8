package execplugin_test

import (
	stdctx "context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/services/agentcontroller"
)

// TestPythonPlugin runs examples/python-admission/plugin.py end to end. It
// needs Debian's python3-grpcio, python3-protobuf and python3-cryptography;
// .ci/run installs them, so in CI a missing module fails the test instead
// of skipping it.
func TestPythonPlugin(t *testing.T) {
	check := exec.Command("/usr/bin/python3", "-c", "import grpc, google.protobuf, cryptography")
	if out, err := check.CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI must have python3-grpcio, python3-protobuf and python3-cryptography: %v\n%s", err, out)
		}
		t.Skipf("python3 with grpc, protobuf and cryptography is not installed (apt-get install python3-grpcio python3-protobuf python3-cryptography): %s", out)
	}
	script, _ := filepath.Abs("../../examples/python-admission/plugin.py")
	h, logs := startExec(t, execConfig(script, `{word: password}`, ""))
	if _, err := send(h, stdctx.Background(), "main", "hello from python"); err != nil {
		t.Fatalf("admit: %v\n%s", err, logs.String())
	}
	_, err := send(h, stdctx.Background(), "main", "the password is 42")
	ref, ok := agentcontroller.RefusalOf(err)
	if !ok || ref.Reason != "no-secrets/word" {
		t.Fatalf("refusal: %v\n%s", err, logs.String())
	}
}
