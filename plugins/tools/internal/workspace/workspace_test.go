package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
)

func TestDirDefaultsToTheWorkingDirectoryAndRefusesRelative(t *testing.T) {
	wd, _ := os.Getwd()
	if d, err := Dir(""); err != nil || d != wd {
		t.Fatalf("Dir(\"\") = %q, %v; want %q", d, err, wd)
	}
	if d, err := Dir("/a/b/../c/"); err != nil || d != "/a/c" {
		t.Fatalf("Dir cleans: %q, %v", d, err)
	}
	if _, err := Dir("rel/dir"); errs.CodeOf(err) != BadWorkspace {
		t.Fatalf("a relative workspace must be refused: %v", err)
	}
}

func TestRel(t *testing.T) {
	ws := t.TempDir()
	for _, c := range []struct{ in, want, reason string }{
		{"", ".", ""},
		{".", ".", ""},
		{"a/b.txt", "a/b.txt", ""},
		{"a/../b", "b", ""},
		{"./a//b/", "a/b", ""},
		{ws, ".", ""},
		{filepath.Join(ws, "x/y"), "x/y", ""},
		{"..", "", ReasonDotDot},
		{"../x", "", ReasonDotDot},
		{"a/../../x", "", ReasonDotDot},
		{"/etc/passwd", "", ReasonAbsolute},
		{filepath.Join(ws, "../sibling"), "", ReasonAbsolute},
		{ws + "-suffix/x", "", ReasonAbsolute},
	} {
		got, err := Rel(ws, c.in)
		if c.reason == "" {
			if err != nil || got != c.want {
				t.Errorf("Rel(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
			continue
		}
		if !errs.Has(err, OutsideWorkspace, c.reason) {
			t.Errorf("Rel(%q) = %q, %v; want refusal %s", c.in, got, err, c.reason)
		} else if !strings.Contains(err.Error(), "workspace") {
			t.Errorf("the refusal must name the rule: %v", err)
		}
	}
}

// TestRelAcceptsTheRealPathOfASymlinkedWorkspace: a workspace reached
// through a symlink is still itself when named by its real path.
func TestRelAcceptsTheRealPathOfASymlinkedWorkspace(t *testing.T) {
	real := t.TempDir()
	link := filepath.Join(t.TempDir(), "ws")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	realAbs, _ := filepath.EvalSymlinks(real)
	if got, err := Rel(link, filepath.Join(realAbs, "f")); err != nil || got != "f" {
		t.Fatalf("Rel = %q, %v", got, err)
	}
}

// TestExplainRecognizesTheRootEscape holds Escaped's text match against the
// Go release in use: if os.Root changes its message, this fails.
func TestExplainRecognizesTheRootEscape(t *testing.T) {
	ws := t.TempDir()
	if err := os.Symlink("/etc", filepath.Join(ws, "etc")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../", filepath.Join(ws, "up")); err != nil {
		t.Fatal(err)
	}
	root, err := Open(ws)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	for _, p := range []string{"etc/passwd", "up/x"} {
		_, err = root.Open(p)
		err = Explain(err, p, ws)
		if !errs.Has(err, OutsideWorkspace, ReasonSymlink) {
			t.Fatalf("open %s through an escaping symlink: %v", p, err)
		}
	}
	// MkdirAll wraps the refusal twice.
	if err := Explain(root.MkdirAll("etc/new/dir", 0o755), "etc/new/dir", ws); !errs.Has(err, OutsideWorkspace, ReasonSymlink) {
		t.Fatalf("MkdirAll through an escaping symlink: %v", err)
	}
	if e := Explain(os.ErrNotExist, "x", ws); e != os.ErrNotExist {
		t.Fatalf("other errors pass unchanged: %v", e)
	}
	if _, err := Open(filepath.Join(ws, "missing")); errs.CodeOf(err) != BadWorkspace {
		t.Fatalf("a missing workspace: %v", err)
	}
}
