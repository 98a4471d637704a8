package files

import (
	stdctx "context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

func TestListSortsMarksAndCaps(t *testing.T) {
	ws := tree(t, map[string]string{"b.txt": "", "a/": "", ".hidden": "", "c/x": ""})
	if err := os.Symlink("b.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if got := ok(t, Config{}, "list", ws, m{}); got != ".hidden\na/\nb.txt\nc/\nlink@\n" {
		t.Fatalf("list = %q", got)
	}
	if got := ok(t, Config{ListMaxEntries: 2}, "list", ws, m{"path": "."}); got != ".hidden\na/\n[3 more entries not shown; list a subfolder or use glob to narrow]\n" {
		t.Fatalf("capped = %q", got)
	}
	if got := ok(t, Config{}, "list", ws, m{"path": "c"}); got != "x\n" {
		t.Fatalf("sub = %q", got)
	}
	if got := ok(t, Config{}, "list", ws, m{"path": "a"}); !strings.Contains(got, "empty") {
		t.Fatal(got)
	}
	refused(t, Config{}, "list", ws, m{"path": "b.txt"}, "is a file", "read")
	refused(t, Config{}, "list", ws, m{"path": "nope"}, "does not exist")
}

// gitTree is a repository-like workspace with root and nested .gitignore
// files and a .git folder.
func gitTree(t *testing.T) string {
	return tree(t, map[string]string{
		".gitignore":         "*.log\n/build/\nnode_modules/\n!keep.log\n",
		".git/config":        "needle in git\n",
		"main.go":            "package main // needle\n",
		"app.log":            "needle in a log\n",
		"keep.log":           "needle kept\n",
		"build/out.go":       "needle built\n",
		"src/build/gen.go":   "needle in a nested build folder\n", // /build/ is anchored to the root
		"src/lib.go":         "package src\nfunc Needle() {}\n",
		"src/.gitignore":     "secret*\n",
		"src/secret.go":      "needle secret\n",
		"other/secret.go":    "needle not secret here\n", // src's .gitignore does not reach here
		"node_modules/m.js":  "needle dep\n",
		"src/node_modules/x": "needle dep\n",
	})
}

func TestGlobRespectsGitignoreAndSortsByPath(t *testing.T) {
	ws := gitTree(t)
	got := ok(t, Config{}, "glob", ws, m{"pattern": "**/*"})
	want := ".gitignore\nkeep.log\nmain.go\nother/secret.go\nsrc/.gitignore\nsrc/build/gen.go\nsrc/lib.go\n"
	if got != want {
		t.Fatalf("glob **/* =\n%s\nwant\n%s", got, want)
	}
	if got := ok(t, Config{}, "glob", ws, m{"pattern": "*.go", "path": "src"}); got != "src/lib.go\n" {
		t.Fatalf("glob with path = %q", got)
	}
	if got := ok(t, Config{}, "glob", ws, m{"pattern": "src/**/*.go"}); got != "src/build/gen.go\nsrc/lib.go\n" {
		t.Fatalf("glob with a fixed folder = %q", got)
	}
	if got := ok(t, Config{}, "glob", ws, m{"pattern": "{main,keep}.*"}); got != "keep.log\nmain.go\n" {
		t.Fatalf("braces = %q", got)
	}
	if got := ok(t, Config{}, "glob", ws, m{"pattern": "nothing/*.x"}); !strings.Contains(got, "no files match") {
		t.Fatalf("no match = %q", got)
	}
	if got := ok(t, Config{GlobMaxResults: 2}, "glob", ws, m{"pattern": "**/*.go"}); got != "main.go\nother/secret.go\n[2 more matches not shown; narrow the pattern or path]\n" {
		t.Fatalf("capped = %q", got)
	}
	refused(t, Config{}, "glob", ws, m{"pattern": "/etc/*"}, "absolute")
	refused(t, Config{}, "glob", ws, m{"pattern": "../*"}, `".."`)
	refused(t, Config{}, "glob", ws, m{"pattern": "[a"}, "not a valid pattern")
	refused(t, Config{}, "glob", ws, m{"pattern": "*", "path": "main.go"}, `"main.go" is a file, or goes through one, where a folder was expected`)
	refused(t, Config{}, "glob", ws, m{"pattern": "*", "path": "nowhere"}, `"nowhere" does not exist`)
}

func TestWalkCapStopsAndSaysSo(t *testing.T) {
	files := map[string]string{}
	for i := range 30 {
		files[fmt.Sprintf("f%02d.txt", i)] = "x\n"
	}
	ws := tree(t, files)
	got := ok(t, Config{WalkMaxEntries: 10}, "glob", ws, m{"pattern": "*.txt"})
	if strings.Count(got, ".txt\n") != 10 || !strings.Contains(got, "stopped after 10 entries") {
		t.Fatalf("glob = %q", got)
	}
	got = ok(t, Config{WalkMaxEntries: 10}, "grep", ws, m{"pattern": "x"})
	if !strings.Contains(got, "stopped after 10 entries") {
		t.Fatalf("grep = %q", got)
	}
}

func TestGrepRespectsGitignoreAndSkipsGit(t *testing.T) {
	ws := gitTree(t)
	got := ok(t, Config{}, "grep", ws, m{"pattern": "needle", "case_insensitive": true})
	want := "keep.log:1: needle kept\nmain.go:1: package main // needle\nother/secret.go:1: needle not secret here\n" +
		"src/build/gen.go:1: needle in a nested build folder\nsrc/lib.go:2: func Needle() {}\n"
	if got != want {
		t.Fatalf("grep =\n%s\nwant\n%s", got, want)
	}
	if got := ok(t, Config{}, "grep", ws, m{"pattern": "needle"}); strings.Contains(got, "Needle") {
		t.Fatalf("case-sensitive by default: %s", got)
	}
	// A path inside the tree still obeys the .gitignore files above it.
	if got := ok(t, Config{}, "grep", ws, m{"pattern": "needle", "path": "src"}); got != "src/build/gen.go:1: needle in a nested build folder\n" {
		t.Fatalf("grep in src = %q", got)
	}
	// A file named outright is searched even when ignored.
	if got := ok(t, Config{}, "grep", ws, m{"pattern": "needle", "path": "app.log"}); got != "app.log:1: needle in a log\n" {
		t.Fatalf("explicit file = %q", got)
	}
}

func TestGrepFiltersCapsAndSkipsBinaries(t *testing.T) {
	var many strings.Builder
	for i := 1; i <= 7; i++ {
		fmt.Fprintf(&many, "hit %d %s\n", i, strings.Repeat("z", 50))
	}
	ws := tree(t, map[string]string{
		"a.go":      many.String(),
		"b.txt":     "hit in txt\n",
		"d/c.go":    "no\nhit deep\n",
		"bin.dat":   "hit\x00binary",
		"large.txt": strings.Repeat("hit\n", 400),
	})
	got := ok(t, Config{GrepMaxMatches: 2, GrepMaxLineBytes: 10, MaxFileBytes: 1000}, "grep", ws, m{"pattern": `hit \d`})
	want := "a.go:1: hit 1 zzzz… [line cut]\na.go:2: hit 2 zzzz… [line cut]\n" +
		"[5 more matching lines not shown (7 in 1 file in all); narrow with path or glob]\n" +
		"[skipped: 1 binary file, 1 file over 1000 bytes]\n"
	if got != want {
		t.Fatalf("grep =\n%q\nwant\n%q", got, want)
	}
	if got := ok(t, Config{}, "grep", ws, m{"pattern": "hit", "glob": "*.go"}); strings.Count(got, "\n") != 8 || strings.Contains(got, "b.txt") {
		t.Fatalf("glob on names = %q", got)
	}
	if got := ok(t, Config{}, "grep", ws, m{"pattern": "hit", "glob": "d/*.go"}); got != "d/c.go:2: hit deep\n" {
		t.Fatalf("glob on paths = %q", got)
	}
	if got := ok(t, Config{}, "grep", ws, m{"pattern": "absent"}); !strings.HasPrefix(got, `no matches for "absent"`) {
		t.Fatalf("no match = %q", got)
	}
	refused(t, Config{}, "grep", ws, m{"pattern": "(?<=a)b"}, "not a valid Go regular expression", "RE2")
	refused(t, Config{}, "grep", ws, m{"pattern": "hit", "path": "bin.dat"}, "binary")
	refused(t, Config{}, "grep", ws, m{"pattern": "hit", "glob": "{a"}, "not a valid pattern")
	refused(t, Config{}, "grep", ws, m{"pattern": "hit", "path": "missing"}, "does not exist")
}

func TestGitignoreRules(t *testing.T) {
	type probe struct {
		path  string
		dir   bool
		want  bool
		stack string // "" root only; otherwise the nested file's folder
	}
	root := parseIgnore(".", []byte(strings.Join([]string{
		"# comment", "", "*.o", "!keep.o", "/top.txt", "doc/*.md", "tmp/", "**/logs", "a/**/z", "deep/**",
		"\\#hash", "space\\ ", "trail   ", "[abc].c", "[!x]y.q", "?.one",
	}, "\n")))
	nested := parseIgnore("sub", []byte("local\n!*.o\n/anchored\n"))
	for _, p := range []probe{
		{"x.o", false, true, ""}, {"d/x.o", false, true, ""}, {"keep.o", false, false, ""},
		{"top.txt", false, true, ""}, {"d/top.txt", false, false, ""},
		{"doc/a.md", false, true, ""}, {"doc/x/a.md", false, false, ""}, {"d/doc/a.md", false, false, ""},
		{"tmp", true, true, ""}, {"tmp", false, false, ""}, {"d/tmp", true, true, ""},
		{"logs", false, true, ""}, {"x/y/logs", true, true, ""},
		{"a/z", false, true, ""}, {"a/b/c/z", false, true, ""}, {"b/a/z", false, false, ""},
		{"deep/x/y", false, true, ""}, {"deep", true, false, ""},
		{"#hash", false, true, ""}, {"space ", false, true, ""}, {"trail", false, true, ""},
		{"a.c", false, true, ""}, {"d.c", false, false, ""}, {"ay.q", false, true, ""}, {"xy.q", false, false, ""},
		{"1.one", false, true, ""}, {"12.one", false, false, ""},
		{"sub/local", false, true, "sub"}, {"local", false, false, ""},
		{"sub/x.o", false, false, "sub"}, // the deeper file re-includes
		{"sub/anchored", false, true, "sub"}, {"sub/d/anchored", false, false, "sub"},
	} {
		stack := []*ignoreFile{root}
		if p.stack != "" {
			stack = append(stack, nested)
		}
		if got := ignored(stack, p.path, p.dir); got != p.want {
			t.Errorf("ignored(%q, dir=%v) = %v, want %v", p.path, p.dir, got, p.want)
		}
	}
}

// TestCancelledSearchesStop: a cancelled call ends with the context's
// error (the loop reports the call as aborted), not a partial result.
func TestCancelledSearchesStop(t *testing.T) {
	ws := gitTree(t)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	cancel()
	args := map[string]string{"grep": `{"pattern":"x"}`, "glob": `{"pattern":"**"}`}
	for _, tool := range (Config{}).withDefaults().build() {
		if raw, ok := args[tool.Name]; ok {
			_, err := tool.Execute(ctx, tools.Call{Name: tool.Name, Arguments: []byte(raw), Workspace: ws})
			if !errors.Is(err, stdctx.Canceled) {
				t.Errorf("%s after cancel: %v", tool.Name, err)
			}
		}
	}
}

// TestAWalkReadsNoMoreOfAFolderThanItsCap: a folder far larger than the
// walk's cap is not held whole in memory; the walk stops at the cap and
// says so.
func TestAWalkReadsNoMoreOfAFolderThanItsCap(t *testing.T) {
	ws := tree(t, nil)
	const n = 20000
	for i := 0; i < n; i++ {
		f, err := os.Create(filepath.Join(ws, fmt.Sprintf("f%05d.txt", i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	cfg := Config{WalkMaxEntries: 10}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	out := ok(t, cfg, "glob", ws, m{"pattern": "*.txt"})
	runtime.ReadMemStats(&after)
	if !strings.Contains(out, "stopped after 10 entries") {
		t.Fatalf("the cap was not reported:\n%s", out)
	}
	// Reading the whole folder allocates well over a megabyte (a DirEntry
	// per file); ten entries and the read buffer take far less.
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Fatalf("a walk capped at 10 entries allocated %d bytes over a folder of %d", got, n)
	}
}
