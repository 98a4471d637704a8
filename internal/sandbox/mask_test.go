//go:build linux

package sandbox_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/sandbox"
)

// secretHome builds a home that holds secrets and, beneath it, the
// workspace: home/{secret, .ssh/id_test, other/notes, .config/tool/token,
// .gitconfig, .config/git/config, ws}.
// It returns home and ws.
func secretHome(t *testing.T) (string, string) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	for path, body := range map[string]string{
		"secret":             "TOPSECRET-1\n",
		".ssh/id_test":       "TOPSECRET-2\n",
		"other/notes":        "TOPSECRET-3\n",
		".gitconfig":         "[user]\n\tname = Sandbox Tester\n",
		".config/git/config": "[alias]\n\tzz = status\n",
		".config/tool/token": "TOPSECRET-4\n",
	} {
		p := filepath.Join(home, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ws := filepath.Join(home, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		t.Fatal(err)
	}
	return home, ws
}

const secretsScript = `cd %s && echo made > f && cat f
git config --global --get user.name
git config --get alias.zz
cat ../.config/tool/token 2>/dev/null
cat ../secret ../.ssh/id_test ../other/notes 2>/dev/null
ls -a .. ../other ../.ssh 2>/dev/null
find .. -maxdepth 3
grep -r TOPSECRET .. /proc/1/cwd/.. 2>/dev/null
echo end`

// TestARootOnlyHomeShowsOnlyTheWayToTheWorkspace: as root, the command
// runs under another uid and a 0700 directory of root's above the
// workspace is masked: the workspace works and git reads ~/.gitconfig,
// while the secrets beside the workspace, and their names, are out of
// reach. Unprivileged, the command keeps the user's uid and reads what the
// user reads (docs/tools.md, "Secrets"): the workspace and git work all
// the same.
func TestARootOnlyHomeShowsOnlyTheWayToTheWorkspace(t *testing.T) {
	st := namespaced(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("git is needed: %v", err)
	}
	home, ws := secretHome(t)
	t.Setenv("HOME", home)
	out, waitErr, entryErr := run(t, st, sandbox.Rules{Writable: []string{ws}}, fmt.Sprintf(secretsScript, ws))
	if entryErr != nil {
		t.Fatalf("entry: %v\n%s", entryErr, out)
	}
	_ = waitErr // ls and cat of what is masked fail, as they should
	if !strings.Contains(out, "made\n") || !strings.Contains(out, "Sandbox Tester\nstatus\n") || !strings.Contains(out, "end\n") {
		t.Fatalf("want the workspace writable and git's user name read:\n%s", out)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "f")); err != nil || string(b) != "made\n" {
		t.Fatalf("the write did not land: %q %v", b, err)
	}
	if os.Geteuid() != 0 {
		if !strings.Contains(out, "TOPSECRET-1") {
			t.Fatalf("unprivileged, the command keeps the user's uid and reads the user's files, as documented:\n%s", out)
		}
		return
	}
	for _, leak := range []string{"TOPSECRET", "secret", "id_test", "notes", ".ssh", "other", "tool"} {
		if strings.Contains(out, leak) {
			t.Errorf("the command saw %q beside the workspace:\n%s", leak, out)
		}
	}
	if t.Failed() {
		return
	}
	t.Log(out)
}

// TestHomeFilesChooseWhatOfHomeShows: an empty list shows none of $HOME,
// a named file shows, and a path out of $HOME is refused.
func TestHomeFilesChooseWhatOfHomeShows(t *testing.T) {
	st := namespaced(t)
	if os.Geteuid() != 0 {
		t.Skip("unprivileged, nothing of the user's own home is masked")
	}
	home, ws := secretHome(t)
	t.Setenv("HOME", home)
	out, _, entryErr := run(t, st, sandbox.Rules{Writable: []string{ws}, HomeFiles: []string{}}, "cat ~/.gitconfig; echo end")
	if entryErr != nil || strings.Contains(out, "Sandbox Tester") || !strings.Contains(out, "end") {
		t.Fatalf("with no home files, want ~/.gitconfig masked (entry %v):\n%s", entryErr, out)
	}
	out, _, entryErr = run(t, st, sandbox.Rules{Writable: []string{ws}, HomeFiles: []string{"other/notes"}}, "cat ~/other/notes ~/.gitconfig; echo end")
	if entryErr != nil || !strings.Contains(out, "TOPSECRET-3") || strings.Contains(out, "Sandbox Tester") {
		t.Fatalf("want ~/other/notes shown and ~/.gitconfig not (entry %v):\n%s", entryErr, out)
	}
	for _, bad := range []string{"../etc/passwd", "/etc/passwd", "."} {
		if _, err := sandbox.Attach(exec.Command("/bin/true"), sandbox.Rules{Writable: []string{ws}, HomeFiles: []string{bad}}, st); !isCode(err, errs.InvalidArgument) {
			t.Errorf("home file %q: want it refused, got %v", bad, err)
		}
	}
}

// TestSecretsAsAnUnprivilegedUser runs the secrets test again as nobody,
// from a copy of this test binary anyone may execute.
func TestSecretsAsAnUnprivilegedUser(t *testing.T) {
	namespaced(t)
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the tests above ran as this user")
	}
	asNobody(t, "^(TestARootOnlyHomeShowsOnlyTheWayToTheWorkspace|TestAMissingProtectedPathCannotBeCreated|TestAPlaceholderOutlivesTheFirstOfTwoRuns|TestSubmoduleConfigsAreProtectedWithTheRepository)$", 4)
}

// asNobody runs the tests matching run as uid and gid 65534 and wants
// want of them to pass, none skipped.
func asNobody(t *testing.T, run string, want int) {
	t.Helper()
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop to nobody: %v", err)
	}
	dir, err := os.MkdirTemp("", "sandbox-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sandbox.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "TMPDIR=" + dir}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "--- SKIP") || strings.Count(string(out), "--- PASS: Test") < want {
		t.Fatalf("as nobody (%v):\n%s", err, out)
	}
}

// TestAMissingProtectedPathCannotBeCreated: a protected path whose parents
// are missing, however deep, cannot be created either: not .git/config
// in a workspace without a repository (so `git init` is refused), nor a
// path three missing directories down. The rest of .git stays writable,
// and what dsh made for the run is gone after it.
func TestAMissingProtectedPathCannotBeCreated(t *testing.T) {
	st := namespaced(t)
	ws := t.TempDir()
	ro := []string{filepath.Join(ws, ".git/config"), filepath.Join(ws, ".git/hooks"), filepath.Join(ws, "a/b/c/app.conf")}
	out, _, entryErr := run(t, st, sandbox.Rules{Writable: []string{ws}, ReadOnly: ro}, fmt.Sprintf(`cd %s
mkdir -p .git/hooks a/b/c
echo evil > .git/config && echo WROTE-CONFIG
echo evil > .git/hooks/pre-commit && echo WROTE-HOOK
echo evil > a/b/c/app.conf && echo WROTE-DEEP
mv .git .git-old && echo MOVED-GIT
mv a a-old && echo MOVED-A
git init -q 2>/dev/null && echo INIT-OK
mkdir .git/objects && echo OBJECTS-OK
echo end`, ws))
	if entryErr != nil || !strings.Contains(out, "OBJECTS-OK\nend\n") {
		t.Fatalf("want the script run and .git's other contents writable (entry %v):\n%s", entryErr, out)
	}
	for _, bad := range []string{"WROTE-CONFIG", "WROTE-HOOK", "WROTE-DEEP", "MOVED-GIT", "MOVED-A", "INIT-OK"} {
		if strings.Contains(out, bad) {
			t.Errorf("%s: a protected path was created through a missing parent:\n%s", bad, out)
		}
	}
	for _, p := range append(ro, filepath.Join(ws, "a"), filepath.Join(ws, ".git-old")) {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s is left on disk after the run", p)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, ".git/objects")); err != nil {
		t.Errorf("what the command made in .git is gone: %v", err)
	}
}
