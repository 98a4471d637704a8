package commands

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/asnobody"
)

// asNobodyDir names, in the child run as nobody, the folder to scan.
const asNobodyDir = "DSH_COMMANDS_TEST_NOBODY_DIR"

// TestUnreadableCommandAsRootAndAsNobody: a command file only root may
// read is a command for root and, for an ordinary user, a problem naming
// the file (COMMAND_UNREADABLE) while the others load; so is a subfolder
// the user cannot list. As root the test re-runs itself as uid 65534.
func TestUnreadableCommandAsRootAndAsNobody(t *testing.T) {
	if dir := os.Getenv(asNobodyDir); dir != "" {
		if os.Getuid() == 0 {
			t.Fatal("the child still runs as root")
		}
		list, problems := scan([]string{dir})
		var msgs []string
		for _, p := range problems {
			if !errs.HasCode(p.Err, Unreadable) {
				t.Errorf("code of %v", p.Err)
			}
			msgs = append(msgs, p.Err.Error())
		}
		all := strings.Join(msgs, "\n")
		if len(list) != 1 || list[0].Name != "open" || len(problems) != 2 ||
			!strings.Contains(all, filepath.Join(dir, "closed.md")+": cannot be read") || !strings.Contains(all, filepath.Join(dir, "locked")+": cannot be listed") {
			t.Fatalf("as uid %d: %+v\n%s", os.Getuid(), list, all)
		}
		return
	}
	root := t.TempDir()
	dir := filepath.Join(root, "commands")
	os.MkdirAll(filepath.Join(dir, "locked"), 0o755)
	for _, n := range []string{"open.md", "closed.md", "locked/hidden.md"} {
		os.WriteFile(filepath.Join(dir, n), []byte("Do "+n+"\n"), 0o644)
	}
	os.Chmod(filepath.Join(dir, "closed.md"), 0)
	os.Chmod(filepath.Join(dir, "locked"), 0o700)
	if os.Getuid() != 0 {
		t.Setenv(asNobodyDir, dir)
		TestUnreadableCommandAsRootAndAsNobody(t)
		return
	}
	if list, problems := scan([]string{dir}); len(list) != 3 || len(problems) != 0 {
		t.Fatalf("as root: %+v %+v", list, problems)
	}
	os.Chmod(root, 0o755)
	os.Chmod(filepath.Dir(root), 0o755)
	asnobody.Run(t, "TestUnreadableCommandAsRootAndAsNobody", asNobodyDir+"="+dir)
}
