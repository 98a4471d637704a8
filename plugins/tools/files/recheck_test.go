package files

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// TestTheCheckOnTheOpenedFileRunsBeforeAnythingChanges: when the file a
// write opened turns out to be protected (a symlink swapped in after the
// question), the existing file is not truncated and a file the write
// created is removed again.
func TestTheCheckOnTheOpenedFileRunsBeforeAnythingChanges(t *testing.T) {
	ws := tree(t, map[string]string{".git/config": "[core]\n"})
	if err := os.Symlink(".git/config", filepath.Join(ws, "swapped")); err != nil {
		t.Fatal(err)
	}
	p, err := enter(callIn(ws))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	check := Config{}.rechecker(p, nil)
	if _, err := writeFile(p.root, "swapped", []byte("x"), check); err == nil {
		t.Fatal("a write through a link onto .git/config passed the check")
	}
	if got := readFile(t, filepath.Join(ws, ".git/config")); got != "[core]\n" {
		t.Fatalf(".git/config changed to %q", got)
	}
	refuse := func(*os.File) error { return errors.New("no") }
	if _, err := writeFile(p.root, "new.txt", []byte("x"), refuse); err == nil {
		t.Fatal("refused")
	}
	if _, err := os.Lstat(filepath.Join(ws, "new.txt")); !os.IsNotExist(err) {
		t.Fatalf("a refused new file stayed: %v", err)
	}
}

func callIn(ws string) tools.Call { return tools.Call{Workspace: ws} }
