//go:build linux

package sandbox_test

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/sandbox"
)

// TestAPlaceholderOutlivesTheFirstOfTwoRuns: two commands in one
// workspace share the placeholder of a missing protected path; the first
// to end must not remove it, which would detach the second's read-only
// mount and let it create the path.
func TestAPlaceholderOutlivesTheFirstOfTwoRuns(t *testing.T) {
	st := namespaced(t)
	ws := t.TempDir()
	r := sandbox.Rules{Writable: []string{ws}, ReadOnly: []string{filepath.Join(ws, "AGENTS.md")}}
	first := exec.Command("/bin/true")
	second := exec.Command("/bin/bash", "-c", `while [ ! -e go ]; do sleep 0.01; done
echo evil > AGENTS.md && echo WROTE; echo end`)
	second.Dir = ws
	var out bytes.Buffer
	second.Stdout, second.Stderr = &out, &out
	var entries []*sandbox.Entry
	for _, cmd := range []*exec.Cmd{first, second} {
		e, err := sandbox.Attach(cmd, r, st)
		if err != nil {
			t.Fatal(err)
		}
		startErr := cmd.Start()
		e.Started()
		if startErr != nil {
			t.Fatal(startErr)
		}
		entries = append(entries, e)
	}
	_ = first.Wait()
	if err := entries[0].Err(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = second.Wait()
	if err := entries[1].Err(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), "WROTE") || !strings.Contains(out.String(), "end") {
		t.Fatalf("the second command created the protected path once the first ended:\n%s", out.String())
	}
	if _, err := os.Lstat(filepath.Join(ws, "AGENTS.md")); err == nil {
		t.Fatal("the placeholder is left after both runs")
	}
}

// TestSubmoduleConfigsAreProtectedWithTheRepository: protecting
// .git/config protects the configuration, hooks and commondir of the submodules git
// keeps in .git/modules, nested ones and names with slashes included,
// while their objects stay writable.
func TestSubmoduleConfigsAreProtectedWithTheRepository(t *testing.T) {
	st := namespaced(t)
	ws := t.TempDir()
	for _, g := range []string{".git", ".git/modules/sub", ".git/modules/libs/json", ".git/modules/sub/modules/deep"} {
		if err := os.MkdirAll(filepath.Join(ws, g, "objects"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{"HEAD": "ref: refs/heads/main\n", "config": "[core]\n"} {
			if err := os.WriteFile(filepath.Join(ws, g, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := sandbox.Rules{Writable: []string{ws}, ReadOnly: []string{filepath.Join(ws, ".git/config")}}
	out, _, entryErr := run(t, st, r, "cd "+ws+`
for g in .git/modules/sub .git/modules/libs/json .git/modules/sub/modules/deep; do
  echo '[core] fsmonitor = evil' >> $g/config && echo "WROTE $g"
  mkdir -p $g/hooks 2>/dev/null; echo evil > $g/hooks/post-checkout && echo "HOOK $g"
  echo ../../../evil > $g/commondir && echo "COMMONDIR $g"
  mv $g $g.old 2>/dev/null && echo "MOVED $g"
  touch $g/objects/ok && echo "OBJECTS $g"
done`)
	if entryErr != nil {
		t.Fatal(entryErr)
	}
	if strings.Count(out, "OBJECTS ") != 3 || strings.Contains(out, "WROTE") || strings.Contains(out, "HOOK") || strings.Contains(out, "MOVED") || strings.Contains(out, "COMMONDIR") {
		t.Fatalf("want every submodule's config and hooks read-only and its objects writable:\n%s", out)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, ".git/modules/sub/config")); string(b) != "[core]\n" {
		t.Fatalf("a submodule's config changed on disk: %q", b)
	}
}

// TestPlaceholdersOfAKilledDshAreSwept: a dsh SIGKILLed mid-command leaves
// its placeholders (.git/config, .git, AGENTS.md as empty read-only
// directories) on disk, where `git init` would fail; the next dsh to
// start a sandboxed command removes them, from the killed one's journal.
func TestPlaceholdersOfAKilledDshAreSwept(t *testing.T) {
	if ws := os.Getenv("DSH_TEST_PLACEHOLDER_WS"); ws != "" {
		holdPlaceholders(t, ws)
		return
	}
	st := namespaced(t)
	ws, journal := t.TempDir(), t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^TestPlaceholdersOfAKilledDshAreSwept$", "-test.count=1")
	helper.Env = append(os.Environ(), "DSH_TEST_PLACEHOLDER_WS="+ws, "DSH_TEST_JOURNAL="+journal)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	if line != "READY\n" {
		_ = helper.Process.Kill()
		_ = helper.Wait()
		t.Fatalf("the helper did not start its command: %q", line)
	}
	_ = helper.Process.Kill()
	_ = helper.Wait()
	if fi, err := os.Lstat(filepath.Join(ws, ".git/config")); err != nil || !fi.IsDir() {
		t.Fatalf("want the killed dsh's placeholder left on disk: %v", err)
	}
	defer sandbox.SetJournalDir(journal)()
	other := t.TempDir()
	if _, _, err := run(t, st, sandbox.Rules{Writable: []string{other}, ReadOnly: []string{filepath.Join(other, "AGENTS.md")}}, "true"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git", "AGENTS.md"} {
		if _, err := os.Lstat(filepath.Join(ws, p)); err == nil {
			t.Errorf("%s is left in the workspace after the next start", p)
		}
	}
	if names, _ := os.ReadDir(journal); len(names) != 0 {
		t.Errorf("journals left: %v", names)
	}
}

// holdPlaceholders is the dsh the test kills: it starts a command that
// holds two placeholders and waits for its end, which never comes.
func holdPlaceholders(t *testing.T, ws string) {
	sandbox.SetJournalDir(os.Getenv("DSH_TEST_JOURNAL"))
	cmd := exec.Command("/bin/bash", "-c", "echo READY; sleep 60")
	cmd.Stdout = os.Stdout
	r := sandbox.Rules{Writable: []string{ws}, ReadOnly: []string{filepath.Join(ws, ".git/config"), filepath.Join(ws, "AGENTS.md")}}
	e, err := sandbox.Attach(cmd, r, sandbox.Probe())
	if err != nil {
		t.Fatal(err)
	}
	startErr := cmd.Start()
	e.Started()
	if startErr != nil {
		t.Fatal(startErr)
	}
	_ = cmd.Wait()
}

// TestPlaceholdersStayInTheirWritableDirectory: dsh makes and removes
// placeholders itself, as root often, so a symlink a command left on the
// way must not lead them elsewhere. A nested repository whose .git is a
// symlink to a directory outside gets no placeholder made there (a
// commondir file in /etc/sudoers.d would stop sudo); and a way swapped
// for such a symlink while the run holds its placeholders (by a command
// running beside it) does not turn their removal into the removal of
// files of those names outside.
func TestPlaceholdersStayInTheirWritableDirectory(t *testing.T) {
	st := namespaced(t)
	ws, outside := t.TempDir(), t.TempDir()
	git := []string{"commondir", "hooks", "config"}
	protected := func(repo string) []string {
		var out []string
		for _, n := range git {
			out = append(out, filepath.Join(ws, repo, ".git", n))
		}
		return out
	}
	runOnce := func(r sandbox.Rules, during func()) {
		t.Helper()
		cmd := exec.Command("/bin/true")
		e, err := sandbox.Attach(cmd, r, st)
		if err != nil {
			t.Fatal(err)
		}
		if during != nil {
			during()
		}
		startErr := cmd.Start()
		e.Started()
		if startErr != nil {
			t.Fatal(startErr)
		}
		_ = cmd.Wait()
		if err := e.Err(); err != nil {
			t.Fatal(err)
		}
	}
	// Made: sub/.git -> outside.
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(ws, "sub", ".git")); err != nil {
		t.Fatal(err)
	}
	runOnce(sandbox.Rules{Writable: []string{ws}, ReadOnly: protected("sub")}, func() {
		if names, _ := os.ReadDir(outside); len(names) != 0 {
			t.Errorf("placeholders were made outside the workspace, through sub/.git: %v", names)
		}
	})
	// Removed: other/.git is made for the run, then swapped for a
	// symlink to a directory holding files of the placeholders' names.
	for _, n := range git {
		f := filepath.Join(outside, n)
		if n == "hooks" {
			if err := os.Mkdir(f, 0o755); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(f, []byte(".\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(ws, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	runOnce(sandbox.Rules{Writable: []string{ws}, ReadOnly: protected("other")}, func() {
		dotgit := filepath.Join(ws, "other", ".git")
		if _, err := os.Stat(filepath.Join(dotgit, "hooks")); err != nil {
			t.Fatalf("no placeholder to swap: %v", err)
		}
		if err := os.Rename(dotgit, dotgit+".old"); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, dotgit); err != nil {
			t.Fatal(err)
		}
	})
	for _, n := range git {
		if _, err := os.Lstat(filepath.Join(outside, n)); err != nil {
			t.Errorf("%s outside the workspace was removed through the swapped other/.git: %v", n, err)
		}
	}
}

// TestTheSweepFollowsNoSymlink: the journal of a dsh that died names its
// placeholders, not the writable directories they were made in; a
// command may since have put a symlink on the way (sub/.git -> outside),
// and the next dsh's sweep must not remove what lies there.
func TestTheSweepFollowsNoSymlink(t *testing.T) {
	st := namespaced(t)
	ws, outside, journal := t.TempDir(), t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Join(outside, "hooks"), filepath.Join(ws, "real", ".git", "hooks"), filepath.Join(ws, "sub")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(ws, "sub", ".git")); err != nil {
		t.Fatal(err)
	}
	// A dsh that is gone: no process has this id.
	list := filepath.Join(ws, "real", ".git", "hooks") + "\n" + filepath.Join(ws, "sub", ".git", "hooks") + "\n"
	if err := os.WriteFile(filepath.Join(journal, "4194000-1"), []byte(list), 0o600); err != nil {
		t.Fatal(err)
	}
	defer sandbox.SetJournalDir(journal)()
	if _, _, err := run(t, st, sandbox.Rules{Writable: []string{t.TempDir()}}, "true"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(ws, "real", ".git", "hooks")); err == nil {
		t.Error("the dead dsh's placeholder in the workspace was not swept")
	}
	if _, err := os.Lstat(filepath.Join(outside, "hooks")); err != nil {
		t.Errorf("the sweep removed a directory outside the workspace through sub/.git: %v", err)
	}
}

// TestPlaceholdersAreSweptInAWorkspaceReachedThroughASymlink: a workspace
// named by a path through a symlink (a home under /home -> /data/home, a
// TMPDIR that is a link) is an ordinary one: a killed dsh's placeholders
// there are swept as anywhere else, through the writable directory they
// were made in. A path holding a space or a newline is one path.
func TestPlaceholdersAreSweptInAWorkspaceReachedThroughASymlink(t *testing.T) {
	st := namespaced(t)
	real, journal := t.TempDir(), t.TempDir()
	parent := t.TempDir()
	link := filepath.Join(parent, "my ws")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	// An empty directory named by the path's first word: no placeholder.
	if err := os.Mkdir(filepath.Join(parent, "my"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The killed dsh: it held placeholders, then died.
	helper := exec.Command(os.Args[0], "-test.run=^TestPlaceholdersOfAKilledDshAreSwept$", "-test.count=1")
	helper.Env = append(os.Environ(), "DSH_TEST_PLACEHOLDER_WS="+link, "DSH_TEST_JOURNAL="+journal)
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(out).ReadString('\n')
	_ = helper.Process.Kill()
	_ = helper.Wait()
	if line != "READY\n" {
		t.Fatalf("the helper did not start its command: %q", line)
	}
	if fi, err := os.Lstat(filepath.Join(real, ".git/config")); err != nil || !fi.IsDir() {
		t.Fatalf("want the killed dsh's placeholder left on disk: %v", err)
	}
	defer sandbox.SetJournalDir(journal)()
	if _, _, err := run(t, st, sandbox.Rules{Writable: []string{t.TempDir()}}, "true"); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{".git", "AGENTS.md"} {
		if _, err := os.Lstat(filepath.Join(real, p)); err == nil {
			t.Errorf("%s is left in the workspace reached through a symlink after the next start", p)
		}
	}
	if _, err := os.Lstat(filepath.Join(parent, "my")); err != nil {
		t.Errorf("the sweep removed %s, which was no placeholder: %v", filepath.Join(parent, "my"), err)
	}
}
