//go:build linux

package bash_test

import (
	"os"
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
