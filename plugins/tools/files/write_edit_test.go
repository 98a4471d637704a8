package files

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteCreatesThenReplaces(t *testing.T) {
	ws := tree(t, nil)
	if got := ok(t, Config{}, "write", ws, m{"path": "a/b/c.txt", "content": "hello"}); got != "created a/b/c.txt (5 bytes)" {
		t.Fatalf("create: %q", got)
	}
	if err := os.Chmod(filepath.Join(ws, "a/b/c.txt"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := ok(t, Config{}, "write", ws, m{"path": "./a/b/c.txt", "content": "x"}); got != "replaced a/b/c.txt (1 byte)" {
		t.Fatalf("replace: %q", got)
	}
	if readFile(t, filepath.Join(ws, "a/b/c.txt")) != "x" {
		t.Fatal("content not replaced")
	}
	if st, _ := os.Stat(filepath.Join(ws, "a/b/c.txt")); st.Mode().Perm() != 0o600 {
		t.Fatalf("a replaced file keeps its mode: %v", st.Mode())
	}
	if got := ok(t, Config{}, "write", ws, m{"path": "empty", "content": ""}); got != "created empty (0 bytes)" {
		t.Fatalf("empty: %q", got)
	}
	refused(t, Config{}, "write", ws, m{"path": "a", "content": "x"}, `"a" is a directory`)
	refused(t, Config{}, "write", ws, m{"path": ".", "content": "x"}, "workspace itself")
	refused(t, Config{}, "write", ws, m{"path": "z"}, "needs path and content")
}

func TestEditReplacesOnceAndShowsADiff(t *testing.T) {
	src := "package p\n\nfunc a() {\n\treturn 1\n}\n\nfunc b() {\n\treturn 2\n}\n"
	ws := tree(t, map[string]string{"p.go": src})
	got := ok(t, Config{}, "edit", ws, m{"path": "p.go", "old": "\treturn 2\n", "new": "\treturn 3\n"})
	want := "edited p.go: 1 replacement\n--- p.go\n+++ p.go\n@@ -5,5 +5,5 @@\n }\n \n func b() {\n-\treturn 2\n+\treturn 3\n }\n"
	if got != want {
		t.Fatalf("edit = %q\nwant %q", got, want)
	}
	if readFile(t, filepath.Join(ws, "p.go")) != strings.Replace(src, "return 2", "return 3", 1) {
		t.Fatal("file not edited")
	}
}

func TestEditZeroMatchesSaysSoAndPointsNear(t *testing.T) {
	ws := tree(t, map[string]string{"p.go": "func a() {\n\treturn 1\n}\n"})
	refused(t, Config{}, "edit", ws, m{"path": "p.go", "old": "    return 1", "new": "x"},
		"old was not found", "nothing changed", "Line 2 holds old's first line (ignoring indentation)")
	refused(t, Config{}, "edit", ws, m{"path": "p.go", "old": "return 12", "new": "x"}, "No line holds")
	if readFile(t, filepath.Join(ws, "p.go")) != "func a() {\n\treturn 1\n}\n" {
		t.Fatal("a failed edit changed the file")
	}
}

func TestEditSeveralMatchesGivesCountAndLines(t *testing.T) {
	src := "x := 1\ny := 2\nx := 1\n\nx := 1\n"
	ws := tree(t, map[string]string{"a.go": src})
	refused(t, Config{}, "edit", ws, m{"path": "a.go", "old": "x := 1", "new": "x := 9"}, "matches 3 times", "at lines 1, 3, 5", "replace_all")
	if readFile(t, filepath.Join(ws, "a.go")) != src {
		t.Fatal("an ambiguous edit changed the file")
	}
	got := ok(t, Config{}, "edit", ws, m{"path": "a.go", "old": "x := 1", "new": "x := 9", "replace_all": true})
	if !strings.HasPrefix(got, "edited a.go: 3 replacements\n") || strings.Count(got, "+x := 9") != 3 {
		t.Fatalf("replace_all: %q", got)
	}
	if readFile(t, filepath.Join(ws, "a.go")) != strings.ReplaceAll(src, "x := 1", "x := 9") {
		t.Fatal("replace_all")
	}
}

// TestEditMatchesCRLFFilesAsReadShowsThem: read strips \r, so old copied
// from it has bare newlines; the edit keeps the file's CRLF endings.
func TestEditMatchesCRLFFilesAsReadShowsThem(t *testing.T) {
	ws := tree(t, map[string]string{"w.txt": "a\r\nb\r\nc\r\n"})
	got := ok(t, Config{}, "edit", ws, m{"path": "w.txt", "old": "a\nb", "new": "A\nB"})
	if !strings.Contains(got, "CRLF") {
		t.Fatal(got)
	}
	if f := readFile(t, filepath.Join(ws, "w.txt")); f != "A\r\nB\r\nc\r\n" {
		t.Fatalf("file = %q", f)
	}
}

func TestEditRefusals(t *testing.T) {
	ws := tree(t, map[string]string{"a.txt": "abc\n", "b.bin": "\x00\x01abc", "big.txt": strings.Repeat("a", 2000), "d/": ""})
	refused(t, Config{}, "edit", ws, m{"path": "a.txt", "old": "abc", "new": "abc"}, "the same")
	refused(t, Config{}, "edit", ws, m{"path": "a.txt", "old": "", "new": "x"}, "old is empty")
	refused(t, Config{}, "edit", ws, m{"path": "a.txt", "old": "abc"}, "new is missing")
	refused(t, Config{}, "edit", ws, m{"path": "b.bin", "old": "abc", "new": "x"}, "binary")
	refused(t, Config{MaxFileBytes: 1000}, "edit", ws, m{"path": "big.txt", "old": "a", "new": "b"}, "over edit's limit of 1000 bytes")
	refused(t, Config{}, "edit", ws, m{"path": "d", "old": "a", "new": "b"}, "is a directory")
	refused(t, Config{}, "edit", ws, m{"path": "gone.txt", "old": "a", "new": "b"}, "does not exist")
	// Deleting text is an edit with an empty new.
	ok(t, Config{}, "edit", ws, m{"path": "a.txt", "old": "b", "new": ""})
	if readFile(t, filepath.Join(ws, "a.txt")) != "ac\n" {
		t.Fatal("delete")
	}
}

func TestUnifiedDiff(t *testing.T) {
	lines := func(n int) string { return numbered(1, n) }
	for _, c := range []struct {
		name, before, after, want string
		max                       int
	}{
		{"equal", "a\n", "a\n", "", 60},
		{"insertion at the top", "a\nb\n", "new\na\nb\n", "--- f\n+++ f\n@@ -1,2 +1,3 @@\n+new\n a\n b\n", 60},
		{"deletion", "a\nb\nc\n", "a\nc\n", "--- f\n+++ f\n@@ -1,3 +1,2 @@\n a\n-b\n c\n", 60},
		{"two far changes, two hunks",
			lines(20),
			strings.Replace(strings.Replace(lines(20), "line 2\n", "line two\n", 1), "line 19\n", "line nineteen\n", 1),
			"--- f\n+++ f\n@@ -1,5 +1,5 @@\n line 1\n-line 2\n+line two\n line 3\n line 4\n line 5\n" +
				"@@ -16,5 +16,5 @@\n line 16\n line 17\n line 18\n-line 19\n+line nineteen\n line 20\n", 60},
		{"capped", "a\n", "b\nc\nd\ne\n", "--- f\n+++ f\n@@ -1,1 +1,4 @@\n-a\n+b\n… (3 more diff lines not shown)\n", 3},
	} {
		if got := unified("f", c.before, c.after, c.max, 300); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestAHardLinkToAFileOutsideIsLeftAlone: os.Root keeps paths inside the
// workspace, but a hard link is the outside file under an inside name;
// write and edit refuse it, and the outside file keeps its content.
func TestAHardLinkToAFileOutsideIsLeftAlone(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := tree(t, nil)
	if err := os.Link(outside, filepath.Join(ws, "inside")); err != nil {
		t.Fatal(err)
	}
	refused(t, Config{}, "write", ws, m{"path": "inside", "content": "gone"}, "more than one hard link")
	refused(t, Config{}, "edit", ws, m{"path": "inside", "old": "keep", "new": "lose"}, "more than one hard link")
	if got := readFile(t, outside); got != "keep me\n" {
		t.Fatalf("the file outside the workspace changed: %q", got)
	}
}
