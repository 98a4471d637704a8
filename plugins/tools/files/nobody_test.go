package files

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/asnobody"
)

// asNobodyWS names, in the child run as nobody, the workspace to test.
const asNobodyWS = "DSH_FILES_TEST_NOBODY_WS"

// TestProtectedPathsHoldForAnUnprivilegedUser: as an ordinary user a file
// can be writable but not readable, so the name cannot be resolved by
// opening it for reading. A symlink onto a write-only .git/config must
// still be asked about (and refused with nobody to ask), not written. As
// root the test re-runs itself as uid 65534 with setpriv.
func TestProtectedPathsHoldForAnUnprivilegedUser(t *testing.T) {
	if ws := os.Getenv(asNobodyWS); ws != "" {
		if os.Getuid() == 0 {
			t.Fatal("the child still runs as root")
		}
		r := run(t, Config{}, "write", ws, m{"path": "cfg", "content": "[core]\n\tfsmonitor = touch pwned\n"})
		if !r.IsError || !strings.Contains(r.Content, "git's configuration") || !strings.Contains(r.Content, "(which leads to .git/config)") || !strings.Contains(r.Content, "was not written") {
			t.Fatalf("as uid %d: %+v", os.Getuid(), r)
		}
		return
	}
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	conf := filepath.Join(ws, ".git", "config")
	if err := os.WriteFile(conf, []byte("[core]\n"), 0o200); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git/config", filepath.Join(ws, "cfg")); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() != 0 {
		t.Setenv(asNobodyWS, ws)
		TestProtectedPathsHoldForAnUnprivilegedUser(t)
	} else {
		// The test binary and the workspace, reachable and owned by nobody.
		for _, p := range []string{ws, filepath.Join(ws, ".git"), conf, filepath.Dir(ws)} {
			if err := os.Lchown(p, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}
		os.Chmod(filepath.Dir(ws), 0o755)
		asnobody.Run(t, "TestProtectedPathsHoldForAnUnprivilegedUser", asNobodyWS+"="+ws)
	}
	if err := os.Chmod(conf, 0o600); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(conf); string(b) != "[core]\n" {
		t.Fatalf(".git/config changed: %q", b)
	}
}
