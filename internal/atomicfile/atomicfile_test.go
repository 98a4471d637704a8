package atomicfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/atomicfile"
)

// A write replaces the content whole, with the mode and what prepare did;
// a failing prepare leaves the old content and no temporary file.
func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	then := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	err := atomicfile.Write(path, []byte("new"), 0o640, func(tmp string) error { return os.Chtimes(tmp, then, then) })
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if b, _ := os.ReadFile(path); err != nil || string(b) != "new" || fi.Mode().Perm() != 0o640 || !fi.ModTime().Equal(then) {
		t.Fatalf("after the write: %q, %v", b, fi)
	}
	boom := errors.New("boom")
	if err := atomicfile.Write(path, []byte("newer"), 0, func(string) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("a failing prepare: %v", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "new" {
		t.Fatalf("a failed write changed the file: %q", b)
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Fatalf("a failed write left %d files", len(names))
	}
	if err := atomicfile.Write(filepath.Join(dir, "missing", "x"), nil, 0, nil); err == nil {
		t.Fatal("a write into a missing directory succeeded")
	}
}
