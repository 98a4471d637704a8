//go:build linux

package bash_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/tools/bash"
)

// TestProtectionReachesNestedReposAndExtraWritableDirs: a repository
// nested in the workspace (vendor/lib, a worktree checkout sub/wt) and one
// at the top of a sandbox.writable directory are as protected as the
// workspace's own .git; the rest stays writable.
func TestProtectionReachesNestedReposAndExtraWritableDirs(t *testing.T) {
	extra := t.TempDir()
	a := start(t, isolated(t, func(c *bash.Config) { c.Sandbox.Writable = []string{extra} }))
	for _, g := range []string{filepath.Join(a.ws, "vendor/lib/.git"), filepath.Join(extra, ".git")} {
		if err := os.MkdirAll(filepath.Join(g, "hooks"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(g, "config"), []byte("[core]\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wt := filepath.Join(a.ws, "sub/wt")
	if err := os.MkdirAll(wt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(wt, ".git"), []byte("gitdir: /nowhere\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := a.run(t.Context(), `echo x >> vendor/lib/.git/config && echo NESTED-CONFIG
echo x > vendor/lib/.git/hooks/pre-commit && echo NESTED-HOOK
echo ../../evil > vendor/lib/.git/commondir && echo NESTED-COMMONDIR
echo 'gitdir: /evil' > sub/wt/.git && echo NESTED-GITFILE
echo x >> `+extra+`/.git/config && echo EXTRA-CONFIG
echo x > `+extra+`/AGENTS.md && echo EXTRA-AGENTS
echo ok > vendor/lib/file && echo ok > `+extra+`/file && echo REST-WRITABLE`)
	for _, bad := range []string{"NESTED-CONFIG", "NESTED-HOOK", "NESTED-COMMONDIR", "NESTED-GITFILE", "EXTRA-CONFIG", "EXTRA-AGENTS"} {
		if strings.Contains(r.Content, bad) {
			t.Errorf("%s:\n%s", bad, r.Content)
		}
	}
	if !strings.Contains(r.Content, "REST-WRITABLE") {
		t.Errorf("the rest must stay writable:\n%s", r.Content)
	}
	if b, _ := os.ReadFile(filepath.Join(a.ws, "vendor/lib/.git/config")); string(b) != "[core]\n" {
		t.Errorf("the nested config changed on disk: %q", b)
	}
}

// TestTheNestedRepoWalkIsBounded: the walk finds repositories a few levels
// down, and none in node_modules or deeper than its depth; it is cheap on
// this module's own checkout.
func TestTheNestedRepoWalkIsBounded(t *testing.T) {
	ws := t.TempDir()
	for _, d := range []string{"a/b/.git", "node_modules/x/.git", "1/2/3/4/5/6/7/.git", "a/b/c/.git"} {
		if err := os.MkdirAll(filepath.Join(ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got := bash.NestedRepos(ws)
	want := []string{filepath.Join(ws, "a/b"), filepath.Join(ws, "a/b/c")}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("nested repos = %q, want %q", got, want)
	}
	began := time.Now()
	bash.NestedRepos("../../..")
	t.Logf("walking this module's checkout took %s", time.Since(began))
}
