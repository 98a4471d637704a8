//go:build linux

package bash_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/plugins/tools/bash"
	"github.com/dsh-go/dsh/services/protect"
)

// The attacks of issue 28 on the sandbox, each run through the tool as a
// model would. They run as root (the common case in containers and CI);
// TestBoundariesAsAnUnprivilegedUser runs them again as nobody.

// isolated returns the default config and skips only where this kernel
// refuses the namespaces the sandbox is built of.
func isolated(t *testing.T, change func(*bash.Config)) bash.Config {
	t.Helper()
	if st := sandbox.Probe(); !st.Namespaces || !st.Available() {
		t.Skipf("this kernel cannot build the sandbox: %s", st)
	}
	return defaults(change)
}

// TestSecretsOfDshAreOutOfReach: a secret in dsh's environment is not in
// the command's environment, nor in /proc/$PPID, /proc/1 or any
// /proc/*/environ it can read. /proc shows the environment a process was
// started with, so the test runs again in a process started with the
// secret, as dsh would be.
func TestSecretsOfDshAreOutOfReach(t *testing.T) {
	const secret = "sk-test-5e3c7e7-not-a-real-key"
	cfg := isolated(t, nil)
	if os.Getenv("DSH_FAKE_PROVIDER_KEY") != secret {
		again := exec.Command(os.Args[0], "-test.run=^TestSecretsOfDshAreOutOfReach$", "-test.count=1", "-test.v")
		again.Env = append(os.Environ(), "DSH_FAKE_PROVIDER_KEY="+secret)
		out, err := again.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestSecretsOfDshAreOutOfReach") {
			t.Fatalf("with the secret in dsh's environment (%v):\n%s", err, out)
		}
		return
	}
	a := start(t, cfg)
	r := a.run(t.Context(), `env; echo PPID=$PPID; tr '\0' '\n' < /proc/$PPID/environ; tr '\0' '\n' < /proc/1/environ
for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f"; done 2>/dev/null; echo searched`)
	if strings.Contains(r.Content, secret) {
		t.Fatalf("the command found dsh's secret:\n%s", r.Content)
	}
	if !strings.Contains(r.Content, "searched") {
		t.Fatalf("the search did not run: %+v", r)
	}
}

// TestMetadataOutsideTheWorkspaceIsReadOnly: chmod, chown, touch, utimes
// and setxattr on a file outside the writable directories fail, and the
// file is unchanged on disk; the command holds no capability.
func TestMetadataOutsideTheWorkspaceIsReadOnly(t *testing.T) {
	a := start(t, isolated(t, nil))
	dir := worldDir(t)
	f := filepath.Join(dir, "outside")
	if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.Stat(f)
	script := fmt.Sprintf(`f=%s
chmod 666 "$f" && echo CHMOD-OK
chmod u+s "$f" && echo SUID-OK
chown 12345 "$f" && echo CHOWN-OK
touch "$f" && echo TOUCH-OK
touch -m -d 2001-01-01 "$f" && echo UTIMES-OK
[ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import os,sys; os.setxattr(sys.argv[1], "user.dsh", b"1")' "$f" 2>/dev/null && echo XATTR-OK
grep CapEff /proc/self/status`, f)
	r := a.run(t.Context(), script)
	for _, bad := range []string{"CHMOD-OK", "SUID-OK", "CHOWN-OK", "TOUCH-OK", "UTIMES-OK", "XATTR-OK"} {
		if strings.Contains(r.Content, bad) {
			t.Errorf("%s: a metadata change outside the workspace succeeded:\n%s", bad, r.Content)
		}
	}
	if !strings.Contains(r.Content, "CapEff:\t0000000000000000") {
		t.Errorf("the command holds capabilities:\n%s", r.Content)
	}
	after, _ := os.Stat(f)
	if after.Mode() != before.Mode() || !after.ModTime().Equal(before.ModTime()) || owner(after) != owner(before) {
		t.Errorf("the file changed on disk: %v %v %d -> %v %v %d", before.Mode(), before.ModTime(), owner(before), after.Mode(), after.ModTime(), owner(after))
	}
	if _, err := syscall.Getxattr(f, "user.dsh", make([]byte, 8)); err == nil {
		t.Error("an extended attribute was set outside the workspace")
	}
}

// TestTheCommandIsNotRootOnDisk: as root, the trap is a user namespace
// without a uid mapping, whose kernel uid stays 0: it would still own, and
// read, root's files. A root-only file outside is unreadable, while files
// the command creates in the workspace land owned by dsh's user.
func TestTheCommandIsNotRootOnDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dsh is not root here: the command keeps this user's uid, which is the point")
	}
	a := start(t, isolated(t, nil))
	dir := worldDir(t)
	secret := filepath.Join(dir, "root-only")
	if err := os.WriteFile(secret, []byte("root's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := a.run(t.Context(), fmt.Sprintf(`cat %s; echo made > made && mkdir madedir && echo ok`, secret))
	if strings.Contains(r.Content, "root's secret") || !strings.Contains(r.Content, "ok\n") {
		t.Fatalf("want the root-only file refused and the workspace writable:\n%s", r.Content)
	}
	for _, name := range []string{"made", "madedir"} {
		st, err := os.Stat(filepath.Join(a.ws, name))
		if err != nil || owner(st) != 0 {
			t.Fatalf("%s: want it owned by dsh's uid 0 on disk: %v", name, err)
		}
	}
	st, _ := os.Stat(filepath.Join(a.ws, "made"))
	if got := st.Sys().(*syscall.Stat_t).Gid; got != 0 {
		t.Fatalf("made: want dsh's gid 0 on disk, got %d", got)
	}
}

// TestProtectedPathsStayReadOnly: inside the writable workspace, .git's
// config and hooks cannot be changed, and a missing .claude cannot be
// created; the placeholder dsh used is gone after the command.
func TestProtectedPathsStayReadOnly(t *testing.T) {
	a := start(t, isolated(t, nil))
	for _, d := range []string{".git/hooks", ".git/info"} {
		if err := os.MkdirAll(filepath.Join(a.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(a.ws, ".git/config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.ws, ".git/hooks/pre-commit"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := a.run(t.Context(), `echo x > .git/config && echo CONFIG-WRITTEN
rm -rf .git/hooks && echo HOOKS-REMOVED
mv .git .git-old && mkdir .git && echo x > .git/config && echo GIT-SWAPPED
rm -rf .git 2>/dev/null; [ -d .git/hooks ] || echo GIT-GONE
mkdir -p .claude/x && echo CLAUDE-MADE
echo y > AGENTS.md && echo AGENTS-WRITTEN
echo fine > notes.txt && cat notes.txt`)
	for _, bad := range []string{"CONFIG-WRITTEN", "HOOKS-REMOVED", "GIT-SWAPPED", "GIT-GONE", "CLAUDE-MADE", "AGENTS-WRITTEN"} {
		if strings.Contains(r.Content, bad) {
			t.Errorf("%s:\n%s", bad, r.Content)
		}
	}
	if !strings.Contains(r.Content, "fine\n") {
		t.Errorf("the rest of the workspace must stay writable:\n%s", r.Content)
	}
	if b, _ := os.ReadFile(filepath.Join(a.ws, ".git/config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
	if _, err := os.Stat(filepath.Join(a.ws, ".git/hooks/pre-commit")); err != nil {
		t.Errorf("the hook is gone: %v", err)
	}
	for _, p := range []string{".claude", "AGENTS.md", "CLAUDE.md", ".mcp.json"} {
		if _, err := os.Lstat(filepath.Join(a.ws, p)); err == nil {
			t.Errorf("%s is left in the workspace after the command", p)
		}
	}
}

// TestProxiedNetworkGoesThroughTheEgressProxy: with an allow list the
// command has loopback only; HTTP_PROXY leads to dsh's egress proxy, which
// lets through what the list allows and refuses the rest in words, and a
// server on the host's loopback is out of reach by any other way.
func TestProxiedNetworkGoesThroughTheEgressProxy(t *testing.T) {
	allowed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "reached-the-allowed-server")
	}))
	t.Cleanup(allowed.Close)
	denied := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "DENIED-SERVER-REACHED")
	}))
	t.Cleanup(denied.Close)
	allowedHost := strings.TrimPrefix(allowed.URL, "http://")
	deniedHost := strings.TrimPrefix(denied.URL, "http://")
	a := start(t, isolated(t, func(c *bash.Config) {
		c.Sandbox.Network = map[string]any{"allow": []any{allowedHost}}
	}))
	r := a.run(t.Context(), fmt.Sprintf(`echo "$HTTP_PROXY $HTTPS_PROXY $http_proxy $https_proxy [$NO_PROXY]"
hp=${HTTP_PROXY#http://}
get() { exec 3<>/dev/tcp/${hp%%%%:*}/${hp##*:} && printf 'GET http://%%s/ HTTP/1.0\r\nHost: %%s\r\n\r\n' "$1" "$1" >&3 && cat <&3; exec 3<&-; }
get %s
get %s
exec 4<>/dev/tcp/%s && echo HOST-REACHED || echo host-refused`, allowedHost, deniedHost, strings.Replace(deniedHost, ":", "/", 1)))
	if !strings.Contains(r.Content, "http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 http://127.0.0.1:3128 []") {
		t.Fatalf("the proxy variables are not set:\n%s", r.Content)
	}
	if !strings.Contains(r.Content, "reached-the-allowed-server") {
		t.Fatalf("the allowed server was not reached through the proxy:\n%s", r.Content)
	}
	if strings.Contains(r.Content, "DENIED-SERVER-REACHED") || !strings.Contains(r.Content, "403") || !strings.Contains(r.Content, "sandbox.network") {
		t.Fatalf("want the server not on the list refused with a 403 naming sandbox.network:\n%s", r.Content)
	}
	if !strings.Contains(r.Content, "host-refused") {
		t.Fatalf("the host's loopback must be out of reach except through the proxy:\n%s", r.Content)
	}
	if !strings.Contains(a.log.String(), "egress policy refused") {
		t.Errorf("the refusal is not in dsh's log:\n%s", a.log.String())
	}
}

// worldDir is a directory outside every test's workspace that any uid may
// enter (t.TempDir's parent is root's alone).
func worldDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "dsh-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

func owner(fi os.FileInfo) uint32 { return fi.Sys().(*syscall.Stat_t).Uid }

// --- strays: nothing a command started outlives dsh, kill -9 included ---

const strayHelperEnv = "DSH_BASH_STRAY_HELPER"

// TestStrayHelper is the process that runs the tool in TestNoStrayOutlivesAKilledDsh;
// alone it does nothing.
func TestStrayHelper(t *testing.T) {
	spec := os.Getenv(strayHelperEnv)
	if spec == "" {
		return
	}
	mode, rest, _ := strings.Cut(spec, ":")
	secs, ws, _ := strings.Cut(rest, ":")
	cfg := defaults(func(c *bash.Config) { c.Sandbox.Mode = mode })
	a := start(t, cfg)
	a.ws = ws
	a.run(t.Context(), fmt.Sprintf(`sleep %s & echo started > started; wait`, secs))
}

func TestNoStrayOutlivesAKilledDsh(t *testing.T) {
	for _, mode := range []string{bash.ModeLandlock, bash.ModeOff} {
		t.Run(mode, func(t *testing.T) {
			if mode == bash.ModeLandlock {
				isolated(t, nil)
			}
			ws := t.TempDir()
			secs := fmt.Sprint(3010000 + os.Getpid()%10000*10 + len(mode))
			helper := exec.Command(os.Args[0], "-test.run=^TestStrayHelper$", "-test.count=1")
			helper.Env = append(os.Environ(), strayHelperEnv+"="+mode+":"+secs+":"+ws)
			var out bytes.Buffer
			helper.Stdout, helper.Stderr = &out, &out
			if err := helper.Start(); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(20 * time.Second)
			for {
				if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
					break
				}
				if time.Now().After(deadline) {
					helper.Process.Kill()
					helper.Wait()
					t.Fatalf("the command never started:\n%s", out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if len(sleepers(secs)) == 0 {
				t.Fatal("the test cannot see the command's sleep")
			}
			_ = helper.Process.Signal(syscall.SIGKILL)
			_ = helper.Wait()
			for end := time.Now().Add(5 * time.Second); ; {
				left := sleepers(secs)
				if len(left) == 0 {
					return
				}
				if time.Now().After(end) {
					for _, p := range left {
						syscall.Kill(p, syscall.SIGKILL)
					}
					t.Fatalf("sleep %s outlived the killed dsh: pids %v", secs, left)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// sleepers are the pids of `sleep secs` processes.
func sleepers(secs string) []int {
	var pids []int
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		b, err := os.ReadFile(d)
		if err != nil || !bytes.Equal(b, []byte("sleep\x00"+secs+"\x00")) {
			continue
		}
		var pid int
		fmt.Sscanf(filepath.Base(filepath.Dir(d)), "%d", &pid)
		pids = append(pids, pid)
	}
	return pids
}

// TestBoundariesAsAnUnprivilegedUser runs the boundary tests again as
// nobody, from a copy of this test binary anyone may execute: there the
// command keeps the user's own kernel uid and the read-only mounts alone
// refuse changes outside.
func TestBoundariesAsAnUnprivilegedUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("already unprivileged: the boundary tests above ran as this user")
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop to nobody: %v", err)
	}
	dir := worldDir(t)
	bin := filepath.Join(dir, "bash.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o777); err != nil {
		t.Fatal(err)
	}
	run := "^(TestSecretsOfDshAreOutOfReach|TestMetadataOutsideTheWorkspaceIsReadOnly|TestProtectedPathsStayReadOnly|TestNoStrayOutlivesAKilledDsh|TestTheSandboxConfinesWritesToTheWorkspaceAndTMPDIR|TestWorktreeCheckoutRuns|TestCommondirCannotRedirectGit|TestOnlyTheStandardDescriptorsReachTheCommand|TestSecretPathsAreHidden|TestProtectionReachesNestedReposAndExtraWritableDirs)$"
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", bin, "-test.run="+run, "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + home, "TMPDIR=/tmp"}
	out, err := cmd.CombinedOutput()
	if err != nil || strings.Contains(string(out), "--- SKIP") || strings.Count(string(out), "--- PASS: Test") < 10 {
		t.Fatalf("as nobody (%v):\n%s", err, out)
	}
}

// TestATimeoutEndsASandboxedCommandThatIgnoresSIGTERM: the shell is the
// PID namespace's init, which the kernel spares SIGTERM; the teardown is
// bounded all the same (SIGKILL after the grace).
func TestATimeoutEndsASandboxedCommandThatIgnoresSIGTERM(t *testing.T) {
	a := start(t, isolated(t, nil))
	began := time.Now()
	r := a.run(t.Context(), `trap '' TERM; sleep 300 & wait; sleep 300`, "timeout", "1")
	if took := time.Since(began); took > 15*time.Second {
		t.Fatalf("the teardown took %s", took)
	}
	if !strings.Contains(r.Content, "timed out after 1s") {
		t.Fatalf("got %+v", r)
	}
}

// TestAProtectedSymlinkAndItsTargetStayReadOnly: AGENTS.md as a symlink to
// another file of the workspace; neither the link nor the file it names
// can be changed.
func TestAProtectedSymlinkAndItsTargetStayReadOnly(t *testing.T) {
	a := start(t, isolated(t, nil))
	if err := os.WriteFile(filepath.Join(a.ws, "real.md"), []byte("orig\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("real.md", filepath.Join(a.ws, "AGENTS.md")); err != nil {
		t.Fatal(err)
	}
	r := a.run(t.Context(), `echo x > AGENTS.md && echo WROTE-LINK; rm -f AGENTS.md && echo REMOVED; echo y > real.md && echo WROTE-TARGET; true`)
	for _, bad := range []string{"WROTE-LINK", "REMOVED", "WROTE-TARGET"} {
		if strings.Contains(r.Content, bad) {
			t.Errorf("%s:\n%s", bad, r.Content)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(a.ws, "real.md")); string(b) != "orig\n" {
		t.Errorf("the target changed: %q", b)
	}
	if l, err := os.Readlink(filepath.Join(a.ws, "AGENTS.md")); err != nil || l != "real.md" {
		t.Errorf("the link changed: %q %v", l, err)
	}
}

// TestWithoutIdmappedMountsWarnRunsUnderRootAndSaysSo: as root where
// idmapped mounts are unavailable (simulated), refuse refuses, and warn
// runs the command in the namespaces under root's own uid, naming what
// that leaves open.
func TestWithoutIdmappedMountsWarnRunsUnderRootAndSaysSo(t *testing.T) {
	st := sandbox.Probe()
	if !st.Root || !st.Namespaces {
		t.Skip("needs dsh as root on a kernel with the sandbox's namespaces")
	}
	st.Idmap, st.IdmapReason = false, "simulated: no idmapped mounts"
	defer bash.SetProbe(st)()
	refused := start(t, defaults(nil))
	if r := refused.run(t.Context(), "touch ran"); !r.IsError || !strings.Contains(r.Content, "simulated: no idmapped mounts") {
		t.Fatalf("refuse: %+v", r)
	}
	a := start(t, defaults(func(c *bash.Config) { c.Sandbox.Unavailable = bash.Warn }))
	r := a.run(t.Context(), "echo in > inside && echo pid=$$")
	if r.IsError || !strings.Contains(r.Content, "kernel uid stays root (NOT isolated") || !strings.Contains(r.Content, "pid=1\n") {
		t.Fatalf("warn: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(a.ws, "inside")); err != nil {
		t.Fatalf("the write inside did not land: %v", err)
	}
}

// TestANestedNamespaceGivesNothingBack: a command that makes a user
// namespace of its own, to hold capabilities there, can neither unmount
// a protected path nor remount anything writable.
func TestANestedNamespaceGivesNothingBack(t *testing.T) {
	a := start(t, isolated(t, nil))
	if err := os.MkdirAll(filepath.Join(a.ws, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a.ws, ".git/config"), []byte("[core]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := a.run(t.Context(), `unshare -Urm sh -c 'umount .git/config && echo UMOUNTED; echo x > .git/config && echo WROTE; mount -o remount,rw / && echo REMOUNTED'
unshare -rm sh -c 'umount .git/config && echo UMOUNTED2'; mount -t tmpfs x /mnt && echo MOUNTED; true`)
	for _, bad := range []string{"UMOUNTED", "WROTE", "REMOUNTED", "MOUNTED"} {
		if strings.Contains(r.Content, bad+"\n") {
			t.Errorf("%s:\n%s", bad, r.Content)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(a.ws, ".git/config")); string(b) != "[core]\n" {
		t.Errorf(".git/config changed: %q", b)
	}
}

// TestTheTreesProtectedListIsReadOnlyInTheSandbox: what services/protect
// lists (here an operator's entry and dsh's own folder) cannot be changed
// by a command, while git can still write its objects and refs under .git.
func TestTheTreesProtectedListIsReadOnlyInTheSandbox(t *testing.T) {
	a := start(t, isolated(t, nil))
	list, err := protect.Key.Get(a.root)
	if err != nil {
		t.Fatal(err)
	}
	list.Add(protect.Entry{Path: "deploy/prod.env", What: "the production settings"})
	for _, d := range []string{"deploy", ".git/objects", ".dsh"} {
		if err := os.MkdirAll(filepath.Join(a.ws, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(a.ws, "deploy/prod.env"), []byte("KEEP\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := a.run(t.Context(), `echo changed > deploy/prod.env 2>/dev/null && echo ENV-CHANGED
echo x > .dsh/token 2>/dev/null && echo DSH-CHANGED
echo obj > .git/objects/ab && echo git-objects-writable`)
	if strings.Contains(r.Content, "ENV-CHANGED") || strings.Contains(r.Content, "DSH-CHANGED") {
		t.Fatalf("a protected path was changed inside the sandbox:\n%s", r.Content)
	}
	if b, _ := os.ReadFile(filepath.Join(a.ws, "deploy/prod.env")); string(b) != "KEEP\n" {
		t.Fatalf("deploy/prod.env is %q", b)
	}
	if !strings.Contains(r.Content, "git-objects-writable") {
		t.Fatalf("git must still write beneath .git:\n%s", r.Content)
	}
}
