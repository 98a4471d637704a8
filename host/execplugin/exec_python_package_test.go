package execplugin_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstalledPythonPackage runs the example as docs/plugins.md installs
// it: a venv on Debian's Python, pip install of the SDK and the example,
// exec: the console script pinned by sha256, and the package's module
// pinned through python -m dsh_plugin.pin. The tool answers through a
// real turn.
func TestInstalledPythonPackage(t *testing.T) {
	requirePython(t)
	tmp := t.TempDir()
	sh := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Copies: building writes build/ and *.egg-info beside the sources.
	sh(".", "cp", "-r", "../../sdk/python", filepath.Join(tmp, "sdk"))
	sh(".", "cp", "-r", "../../examples/python-tool", filepath.Join(tmp, "example"))
	venv := filepath.Join(tmp, "venv")
	sh(tmp, "/usr/bin/python3", "-m", "venv", "--system-site-packages", venv)
	sh(tmp, filepath.Join(venv, "bin", "pip"), "install", "--no-build-isolation", "--no-index", "--quiet", "./sdk", "./example")
	py := filepath.Join(venv, "bin", "python")
	module := strings.TrimSpace(sh(tmp, py, "-c", "import dsh_file_stats; print(dsh_file_stats.__file__)"))
	pins := sh(tmp, py, "-m", "dsh_plugin.pin", module)
	if !strings.HasPrefix(pins, "pin:\n  - file: "+module+"\n    sha256: ") {
		t.Fatalf("dsh_plugin.pin printed %q", pins)
	}
	script := filepath.Join(venv, "bin", "dsh-file-stats")
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	entry := fmt.Sprintf("  - id: stats\n    exec: %s\n    sha256: %s\n", script, hex.EncodeToString(sum[:]))
	for _, line := range strings.Split(strings.TrimSpace(pins), "\n") {
		entry += "    " + line + "\n"
	}
	got, logs := toolTurnLogs(t, entry, "file_stats", `{"pattern": "*.txt"}`)
	if want := "lines words bytes file\n2 3 14 a.txt\n1 1 5 b.txt\n3 4 19 total"; got[0] != want {
		t.Fatalf("file_stats from the installed package:\n%q\nwant %q\n%s", got[0], want, logs.String())
	}
}
