//go:build linux

package bash_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorktreeCheckoutRuns: in a git worktree or submodule checkout .git
// is a file (`gitdir: …`). Commands run there, and the file itself stays
// read-only: its gitdir line would send the user's next git to a
// configuration the command wrote.
func TestWorktreeCheckoutRuns(t *testing.T) {
	a := start(t, isolated(t, nil))
	const link = "gitdir: /nonexistent/main/.git/worktrees/wt\n"
	if err := os.WriteFile(filepath.Join(a.ws, ".git"), []byte(link), 0o644); err != nil {
		t.Fatal(err)
	}
	r := a.run(t.Context(), `echo RAN
echo "gitdir: $PWD/evil" > .git && echo REDIRECTED
rm -f .git && echo REMOVED
mv .git moved && echo MOVED; true`)
	if !strings.Contains(r.Content, "RAN\n") {
		t.Fatalf("a command must run in a worktree checkout:\n%s", r.Content)
	}
	for _, bad := range []string{"REDIRECTED", "REMOVED", "MOVED"} {
		if strings.Contains(r.Content, bad) {
			t.Errorf("%s: the .git file was changed:\n%s", bad, r.Content)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(a.ws, ".git")); string(b) != link {
		t.Errorf(".git changed: %q", b)
	}
}

// TestCommondirCannotRedirectGit is the commondir escape, end to end with
// real git: the command copies .git, sets core.fsmonitor in the copy and
// points .git/commondir (or a linked worktree's) at it; the user's next
// `git status`, outside the sandbox, would run the planted command.
func TestCommondirCannotRedirectGit(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatal("git is needed for this test: ", err)
	}
	a := start(t, isolated(t, nil))
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(gitBin, append([]string{"-c", "user.name=t", "-c", "user.email=t@t", "-C", dir}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git(a.ws, "init", "-q")
	git(a.ws, "commit", "-q", "--allow-empty", "-m", "first")
	git(a.ws, "worktree", "add", "-q", "wt")
	marker := filepath.Join(t.TempDir(), "ran")
	r := a.run(t.Context(), fmt.Sprintf(`cp -r .git evil
git config -f evil/config core.fsmonitor 'touch %s; false'
echo ../evil > .git/commondir && echo MAIN-REDIRECTED
echo ../../../evil > .git/worktrees/wt/commondir && echo WT-REDIRECTED
echo '[core] fsmonitor = touch %s' > .git/config.worktree && echo WORKTREE-CONFIG
git status >/dev/null && echo STATUS-OK`, marker, marker))
	for _, bad := range []string{"MAIN-REDIRECTED", "WT-REDIRECTED", "WORKTREE-CONFIG"} {
		if strings.Contains(r.Content, bad) {
			t.Errorf("%s:\n%s", bad, r.Content)
		}
	}
	if !strings.Contains(r.Content, "STATUS-OK") {
		t.Errorf("git must still work inside the sandbox:\n%s", r.Content)
	}
	git(a.ws, "status")
	git(filepath.Join(a.ws, "wt"), "status")
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the user's git status ran the command planted through commondir")
	}
	if _, err := os.Lstat(filepath.Join(a.ws, ".git/commondir")); err == nil {
		t.Error("the commondir placeholder is left in .git after the command")
	}
}
