// Package asnobody runs one test of the running test binary again as an
// ordinary user, uid and gid 65534, so a test that runs as root (as CI and
// most containers do) can also check what an unprivileged dsh sees: a file
// it cannot read, a folder it cannot list.
package asnobody

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// UID is the user (and group) Run runs as: nobody on Debian.
const UID = 65534

// Run runs test name of the running test binary as UID, through setpriv,
// with env ("KEY=value") added to its environment, and returns its output.
// The binary is copied to a folder every user can enter first: the
// original usually sits where only root may look. Run fails t unless the
// test ran and passed, so a name that matches no test cannot pass.
func Run(t testing.TB, name string, env ...string) string {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to run %s as uid %d: %v", name, UID, err)
	}
	dir, err := os.MkdirTemp("", "dsh-asnobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(os.Args[0]))
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin,
		"-test.run=^"+name+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+name) {
		t.Fatalf("%s as uid %d: %v\n%s", name, UID, err, out)
	}
	return string(out)
}
