//go:build linux

package childproc_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/childproc"
	"github.com/dsh-go/dsh/internal/syncbuf"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv("CHILDPROC_HELPER"); mode != "" {
		helperWatch(mode)
		return
	}
	goleak.VerifyTestMain(m)
}

func TestEnvironKeepsTheBaseAndWhatTheConfigPasses(t *testing.T) {
	host := []string{"PATH=/bin", "HOME=/h", "LC_TIME=C", "DEEPSEEK_API_KEY=sk-secret", "FOO=1", "BAR=2"}
	got := childproc.Environ(host, []string{"FOO", "UNSET"}, map[string]string{"PATH": "/opt/bin", "X": "y"})
	want := []string{"FOO=1", "HOME=/h", "LC_TIME=C", "PATH=/opt/bin", "X=y"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	got = childproc.Environ(host, []string{"DEEPSEEK_API_KEY"}, nil)
	if !slices.Contains(got, "DEEPSEEK_API_KEY=sk-secret") {
		t.Fatalf("a passed-through key must reach the child: %q", got)
	}
}

// TestAChildDoesNotSeeTheHostsSecrets runs a real process with dsh's own
// environment as the source, as every child is started.
func TestAChildDoesNotSeeTheHostsSecrets(t *testing.T) {
	t.Setenv("DEEPSEEK_API_KEY", "sk-secret")
	t.Setenv("LANG", "C.UTF-8")
	p, err := childproc.New(childproc.Spec{Path: "/usr/bin/env", Env: map[string]string{"MINE": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p.Cmd.Stdout = &out
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	p.Stop(time.Second)
	env := strings.Split(strings.TrimSpace(out.String()), "\n")
	if slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "DEEPSEEK_API_KEY=") }) {
		t.Fatalf("the provider key leaked into the child: %q", env)
	}
	for _, want := range []string{"MINE=1", "LANG=C.UTF-8", "PATH=" + os.Getenv("PATH")} {
		if !slices.Contains(env, want) {
			t.Errorf("the child lacks %s: %q", want, env)
		}
	}
}

// alive reports whether pid runs (a zombie waiting to be reaped does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// The state follows the command name in parentheses.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("process %d outlived its group's teardown", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readPID reads the first line the child prints: a grandchild's pid.
func readPID(t *testing.T, r io.Reader) int {
	t.Helper()
	line, err := bufio.NewReader(r).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the grandchild's pid: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// TestStopKillsTheWholeGroupEvenWhenItIgnoresSIGTERM: a shell that ignores
// SIGTERM (its child inherits that) with a grandchild holding its output;
// Stop escalates to SIGKILL and both are gone, within the bound.
func TestStopKillsTheWholeGroupEvenWhenItIgnoresSIGTERM(t *testing.T) {
	p, grandchild := startWithGrandchild(t, childproc.Spec{Path: "/bin/sh", Args: []string{"-c", `trap "" TERM; sleep 300 & echo $!; wait`}})
	if !p.Stop(100 * time.Millisecond) {
		t.Fatal("Stop did not see the child exit")
	}
	waitGone(t, grandchild)
}

// TestStopIsBoundedWhenAnEscapedProcessHoldsThePipe: a grandchild that left
// the group (setsid) keeps the output pipe open; Stop still returns, because
// WaitDelay bounds the copy.
func TestStopIsBoundedWhenAnEscapedProcessHoldsThePipe(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Fatalf("setsid (util-linux) is needed: %v", err)
	}
	p, err := childproc.New(childproc.Spec{Path: "/bin/sh", Args: []string{"-c", setsid + ` sleep 300 & echo $!; wait`}})
	if err != nil {
		t.Fatal(err)
	}
	pr, pw := io.Pipe()
	p.Cmd.Stdout = pw // not an *os.File: Wait copies it
	p.Cmd.WaitDelay = 200 * time.Millisecond
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	go p.Wait()
	escaped := readPID(t, pr)
	go io.Copy(io.Discard, pr)
	t.Cleanup(func() { syscall.Kill(escaped, syscall.SIGKILL); pw.Close() })
	start := time.Now()
	if !p.Stop(time.Second) {
		t.Fatalf("Stop gave up waiting; WaitDelay should have ended the copy (after %s)", time.Since(start))
	}
}

// TestAChildsGroupDiesWhenTheHostIsGone: the child watches the host pipe
// and kills its group when it reads end-of-file; closing the host's end
// stands for dsh being SIGKILLed.
func TestAChildsGroupDiesWhenTheHostIsGone(t *testing.T) {
	p, grandchild := startWithGrandchild(t, childproc.Spec{Path: os.Args[0], Env: map[string]string{"CHILDPROC_HELPER": "watch"}})
	child := p.Pid()
	p.CloseHostEnd()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		p.Stop(time.Second)
		t.Fatal("the child did not notice the host was gone")
	}
	waitGone(t, grandchild)
	if alive(child) {
		t.Fatal("the child is still running")
	}
}

// TestABrokenOutputEndsNothingUntilTheHostIsGone: a write to a stdout
// nobody reads any more raises SIGPIPE, whose default action would end the
// child before the host pipe's end-of-file reached it, leaving its
// grandchild. The watcher catches SIGPIPE, so the child lives on while the
// host does (a broken pipe of its own is no reason to die), and its group
// dies once the host is gone.
func TestABrokenOutputEndsNothingUntilTheHostIsGone(t *testing.T) {
	p, err := childproc.New(childproc.Spec{Path: os.Args[0], Env: map[string]string{"CHILDPROC_HELPER": "write"}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	grandchild := readPID(t, out)
	out.Close() // the child's next write breaks; the host pipe stays open
	go p.Wait()
	defer p.Stop(time.Second)
	// The child writes every 5 ms: 200 ms is forty broken writes.
	select {
	case <-p.Done():
		t.Fatal("a broken stdout ended the child while the host was still there")
	case <-time.After(200 * time.Millisecond):
	}
	p.CloseHostEnd() // dsh is gone
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the child did not notice the host was gone")
	}
	waitGone(t, grandchild)
}

// helperWatch is the child of the tests of WatchHost: it starts a
// grandchild, prints its pid and waits for the host to go; in mode
// "write" it keeps writing to stdout meanwhile.
func helperWatch(mode string) {
	if !childproc.WatchHost(childproc.KillOwnGroup) {
		fmt.Println("no host pipe")
		os.Exit(2)
	}
	cmd := exec.Command("sleep", "300")
	if err := cmd.Start(); err != nil {
		fmt.Println(err)
		os.Exit(2)
	}
	fmt.Println(cmd.Process.Pid)
	for mode == "write" {
		fmt.Println("still here")
		time.Sleep(5 * time.Millisecond)
	}
	select {}
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(fds)
}

// TestStopReleasesAChildThatNeverStarted: a start abandoned after New
// (the caller's own setup failed) leaves no descriptor behind.
func TestStopReleasesAChildThatNeverStarted(t *testing.T) {
	before := openFDs(t)
	p, err := childproc.New(childproc.Spec{Path: "/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	if openFDs(t) != before+2 {
		t.Fatalf("New should hold the two ends of the host pipe")
	}
	if !p.Stop(time.Second) {
		t.Fatal("Stop on a child that never started must report done")
	}
	if got := openFDs(t); got != before {
		t.Fatalf("%d descriptors leaked", got-before)
	}
}

// TestAnInheritedDescriptorDoesNotReachTheChild: a descriptor dsh was
// given without close-on-exec (a shell's 7>>file) must not pass on to a
// child, which could write through it where nothing allows.
func TestAnInheritedDescriptorDoesNotReachTheChild(t *testing.T) {
	f := filepath.Join(t.TempDir(), "outside")
	fd, err := syscall.Open(f, syscall.O_WRONLY|syscall.O_CREAT, 0o600) // no O_CLOEXEC: as if inherited
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	p, err := childproc.New(childproc.Spec{Path: "/bin/sh", Args: []string{"-c", "ls /proc/$$/fd"}})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	p.Cmd.Stdout = &out
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	p.Wait()
	p.Stop(time.Second)
	fds := strings.Fields(out.String())
	if slices.Contains(fds, strconv.Itoa(fd)) {
		t.Fatalf("descriptor %d reached the child (its descriptors: %v)", fd, fds)
	}
	if len(fds) == 0 {
		t.Fatal("the child listed no descriptors; the check saw nothing")
	}
}

// startWithGrandchild starts spec's child, whose first line on stdout is
// the pid of a process it started, reaps it in the background, and returns
// it with that pid.
func startWithGrandchild(t *testing.T, spec childproc.Spec) (*childproc.Proc, int) {
	t.Helper()
	p, err := childproc.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	go p.Wait()
	return p, readPID(t, out)
}

// TestAGuardedGroupDiesWhenTheHostIsGone: a child that does not watch the
// host pipe (a shell, an MCP server behind npx) and started a process of
// its own; with Guard, the watcher in its group kills both once the host
// is gone, which closing the host's end stands for.
func TestAGuardedGroupDiesWhenTheHostIsGone(t *testing.T) {
	p, grandchild := startWithGrandchild(t, childproc.Spec{Path: "/bin/sh", Args: []string{"-c", "sleep 300 & echo $!; exec sleep 301"}, Guard: true})
	p.CloseHostEnd()
	select {
	case <-p.Done():
	case <-time.After(5 * time.Second):
		p.Stop(time.Second)
		t.Fatal("the guard did not kill the child once the host was gone")
	}
	waitGone(t, grandchild)
	p.Stop(time.Second)
}

// TestStopEndsTheGuard: a guarded child stopped the usual way leaves no
// watcher behind (goleak checks the goroutine that reaps it).
func TestStopEndsTheGuard(t *testing.T) {
	p, err := childproc.New(childproc.Spec{Path: "/bin/sleep", Args: []string{"300"}, Guard: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	go p.Wait()
	pgid := p.Pid()
	if !p.Stop(time.Second) {
		t.Fatal("Stop did not end the child")
	}
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(-pgid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatal("something of the guarded group outlived Stop")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// StartPiped: what is written to the child's stdin comes back on its
// stdout (cat), its stderr goes where it was told, and closing stdin ends
// it, which the background reaper reports through Done.
func TestStartPipedTalksAndReaps(t *testing.T) {
	p, err := childproc.New(childproc.Spec{Path: "/bin/sh", Args: []string{"-c", "echo ready >&2; cat"}})
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncbuf.Buffer
	in, out, err := p.StartPiped(&stderr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if _, err := io.WriteString(in, "hello\n"); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 6)
	if _, err := io.ReadFull(out, got); err != nil || string(got) != "hello\n" {
		t.Fatalf("read %q, %v", got, err)
	}
	in.Close()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the child was not reaped after its stdin closed")
	}
	if err := p.Err(); err != nil || !strings.Contains(stderr.String(), "ready") {
		t.Fatalf("exit %v, stderr %q", err, stderr.String())
	}
}

// A command that cannot start leaves nothing open and says what failed.
func TestStartPipedReportsAFailedStart(t *testing.T) {
	p, err := childproc.New(childproc.Spec{Path: "/nonexistent/server"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.StartPiped(io.Discard, time.Second); err == nil || !strings.Contains(err.Error(), "/nonexistent/server") {
		t.Fatalf("start of a missing command: %v", err)
	}
}
