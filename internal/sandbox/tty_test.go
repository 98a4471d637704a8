//go:build linux

package sandbox_test

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/dsh-go/dsh/internal/sandbox"
)

// hasTTY is a script that says whether its shell has a controlling
// terminal: /dev/tty opens only then.
const hasTTY = `if (: </dev/tty) 2>/dev/null; then echo HAS-TTY; else echo NO-TTY; fi`

// TestTheCommandHasNoControllingTerminal: dsh run from a terminal must not
// lend it to a sandboxed command, which could otherwise push input into it
// (TIOCSTI, where Landlock is older than ABI 5), take the foreground and
// read what the person types, or hang up dsh's session. The test runs
// again in a process that leads a session with a pseudo-terminal as its
// controlling terminal, as dsh in a terminal does; there a command outside
// the sandbox has the terminal, and one inside (with namespaces, and with
// Landlock only) has none.
func TestTheCommandHasNoControllingTerminal(t *testing.T) {
	st := landlock(t)
	if os.Getenv("SANDBOX_TTY_HELPER") == "1" {
		withTerminal(t, st)
		return
	}
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Fatalf("a pseudo-terminal for the test: %v", err)
	}
	defer master.Close()
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.FormatUint(uint64(n), 10), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer slave.Close()
	again := exec.Command(os.Args[0], "-test.run=^TestTheCommandHasNoControllingTerminal$", "-test.count=1", "-test.v")
	again.Env = append(os.Environ(), "SANDBOX_TTY_HELPER=1")
	var out bytes.Buffer
	again.Stdin, again.Stdout, again.Stderr = slave, &out, &out
	again.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := again.Run(); err != nil || !strings.Contains(out.String(), "--- PASS: TestTheCommandHasNoControllingTerminal") {
		t.Fatalf("run from a terminal (%v):\n%s", err, out.String())
	}
}

func withTerminal(t *testing.T, st sandbox.Status) {
	outside, err := exec.Command("/bin/sh", "-c", hasTTY).CombinedOutput()
	if err != nil || !strings.Contains(string(outside), "HAS-TTY") {
		t.Fatalf("the test's process must have a controlling terminal for the check to mean anything: %v %s", err, outside)
	}
	weak := st
	weak.Namespaces, weak.NSReason = false, "left out by the test"
	for _, c := range []struct {
		name string
		st   sandbox.Status
		r    sandbox.Rules
	}{
		{"namespaces", st, sandbox.Rules{Writable: []string{t.TempDir()}}},
		{"Landlock only", weak, sandbox.Rules{Writable: []string{t.TempDir()}, Network: sandbox.NetworkOn, Accept: sandbox.NoNamespaces}},
	} {
		if c.st.Namespaces && !st.Namespaces {
			continue
		}
		out, waitErr, entryErr := run(t, c.st, c.r, hasTTY+`; read -r _ _ _ _ _ _ nr _ < /proc/self/stat; echo tty_nr=$nr`)
		if entryErr != nil || waitErr != nil {
			t.Fatalf("%s: entry %v, exit %v: %s", c.name, entryErr, waitErr, out)
		}
		if !strings.Contains(out, "NO-TTY") || !strings.Contains(out, "tty_nr=0") {
			t.Errorf("%s: the sandboxed command has dsh's controlling terminal:\n%s", c.name, out)
		}
	}
}
