package sandbox_test

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/dsh-go/dsh/internal/asnobody"
	"github.com/dsh-go/dsh/internal/nodump"
	"github.com/dsh-go/dsh/internal/sandbox"
)

// TestANonDumpableLauncherEnters: dsh is non-dumpable, so its children are
// root's in /proc until they execve, and an ordinary user cannot write
// their uid_map from outside. The sandbox still starts, as root (the
// command under another uid) and as nobody (the command under nobody's
// own uid, mapped from inside), and what it writes lands owned so.
func TestANonDumpableLauncherEnters(t *testing.T) {
	if os.Geteuid() == 0 && os.Getenv("SANDBOX_AS_NOBODY") == "" {
		defer asnobody.Run(t, "TestANonDumpableLauncherEnters", "SANDBOX_AS_NOBODY=1")
	}
	if err := nodump.Seal(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0) })
	st := landlock(t)
	if !st.Namespaces {
		t.Fatalf("a non-dumpable process cannot start the namespaced sandbox: %s", st.NSReason)
	}
	ws, err := os.MkdirTemp("", "dsh-nodump-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(ws)
	out, waitErr, entryErr := run(t, st, sandbox.Rules{Writable: []string{ws}}, fmt.Sprintf(`id -u; id -g; echo in > %s/f`, ws))
	if entryErr != nil || waitErr != nil {
		t.Fatalf("entry %v, exit %v: %s", entryErr, waitErr, out)
	}
	// As root the command is its namespace's root, mapped to another uid
	// outside (root's own on disk, through the idmapped mount); as nobody
	// it keeps nobody's ids.
	want := fmt.Sprintf("%d\n%d\n", os.Geteuid(), os.Getegid())
	if out != want {
		t.Fatalf("the command's ids: got %q, want %q", out, want)
	}
	fi, err := os.Stat(filepath.Join(ws, "f"))
	if err != nil {
		t.Fatal(err)
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
		t.Fatalf("the file the command wrote is owned by %d on disk, not by dsh's user %d", uid, os.Geteuid())
	}
}
