//go:build linux

package sandbox_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/sandbox"
)

// namespaced returns this kernel's status, or skips where it refuses the
// namespaces the sandbox is built of.
func namespaced(t *testing.T) sandbox.Status {
	t.Helper()
	st := landlock(t)
	if !st.Namespaces {
		t.Skipf("this kernel or container refuses the sandbox's namespaces: %s", st.NSReason)
	}
	return st
}

// TestTheProxyListenerIsHandedToDsh: with NetworkProxied the command
// reaches 127.0.0.1:ProxyPort, which is the listener Entry.Listener gives
// dsh, and nothing else on loopback.
func TestTheProxyListenerIsHandedToDsh(t *testing.T) {
	st := namespaced(t)
	_, hostPort := listen(t)
	cmd := exec.Command("/bin/bash", "-c", fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/4128 && echo hello >&3 && read -r line <&3 && echo "got $line"
exec 4<>/dev/tcp/127.0.0.1/%d 2>/dev/null && echo HOST || echo no-host`, hostPort))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	e, err := sandbox.Attach(cmd, sandbox.Rules{Writable: []string{t.TempDir()}, Network: sandbox.NetworkProxied, ProxyPort: 4128}, st)
	if err != nil {
		t.Fatal(err)
	}
	startErr := cmd.Start()
	e.Started()
	if startErr != nil {
		t.Fatal(startErr)
	}
	l, err := e.Listener()
	if err != nil || l == nil {
		t.Fatalf("no listener: %v", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := l.Accept()
		if err != nil {
			return
		}
		line, _ := bufio.NewReader(c).ReadString('\n')
		fmt.Fprintf(c, "echo:%s", line)
		c.Close()
	}()
	b, _ := io.ReadAll(out)
	_ = cmd.Wait()
	l.Close()
	<-done
	if err := e.Err(); err != nil {
		t.Fatal(err)
	}
	if got := string(b); !strings.Contains(got, "got echo:hello") || !strings.Contains(got, "no-host") {
		t.Fatalf("want the proxy reached and the host's loopback not:\n%s", got)
	}
}

// TestKillingTheInitEndsEverything: the shell is the first process of its
// PID namespace; killing it (what a SIGKILLed dsh's parent-death signal
// does) kills whatever the command left in the background, even a process
// that made itself a session leader of its own.
func TestKillingTheInitEndsEverything(t *testing.T) {
	st := namespaced(t)
	ws := t.TempDir()
	secs := fmt.Sprint(4010000 + os.Getpid()%10000)
	cmd := exec.Command("/bin/bash", "-c", fmt.Sprintf(`setsid sleep %s & sleep %s & echo up > up; wait`, secs, secs))
	cmd.Dir = ws
	e, err := sandbox.Attach(cmd, sandbox.Rules{Writable: []string{ws}}, st)
	if err != nil {
		t.Fatal(err)
	}
	startErr := cmd.Start()
	e.Started()
	if startErr != nil {
		t.Fatal(startErr)
	}
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(ws, "up")); err == nil {
			break
		}
		if time.Now().After(end) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal("the command never started")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	_ = e.Err()
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		n := countSleepers(secs)
		if n == 0 {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("%d sleep %s outlived the namespace's init", n, secs)
		}
	}
}

func countSleepers(secs string) int {
	n := 0
	dirs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, d := range dirs {
		if b, err := os.ReadFile(d); err == nil && string(b) == "sleep\x00"+secs+"\x00" {
			n++
		}
	}
	return n
}

// TestFallbacksRunWhatCanBeHad: accepted weakenings run the command with
// the layers that remain: Landlock only (no namespaces), and, as root,
// namespaces under root's own uid (no idmapped mounts).
func TestFallbacksRunWhatCanBeHad(t *testing.T) {
	st := namespaced(t)
	landlockOnly := st
	landlockOnly.Namespaces, landlockOnly.NSReason = false, "simulated"
	sameUID := st
	sameUID.Idmap, sameUID.IdmapReason = false, "simulated"
	for name, c := range map[string]struct {
		st     sandbox.Status
		accept sandbox.Weaken
		ns     bool
	}{
		"landlock only": {landlockOnly, sandbox.AcceptAll, false},
		"same uid":      {sameUID, sandbox.SameUID, true},
	} {
		t.Run(name, func(t *testing.T) {
			ws, outside := t.TempDir(), t.TempDir()
			out, waitErr, entryErr := run(t, c.st, sandbox.Rules{Writable: []string{ws}, Network: sandbox.NetworkOn, Accept: c.accept},
				fmt.Sprintf(`echo in > %s/a && echo wrote; echo out > %s/b || echo refused; echo pid=$$`, ws, outside))
			if entryErr != nil || waitErr != nil {
				t.Fatalf("entry %v, exit %v: %s", entryErr, waitErr, out)
			}
			if !strings.Contains(out, "wrote") || !strings.Contains(out, "refused") {
				t.Fatalf("want the workspace written and outside refused:\n%s", out)
			}
			if inNS := strings.Contains(out, "pid=1\n"); inNS != c.ns {
				t.Fatalf("want a PID namespace: %v:\n%s", c.ns, out)
			}
		})
	}
}
