//go:build linux

package sandbox_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/sandbox"
	"github.com/dsh-go/dsh/internal/sandbox/entry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// landlock returns this kernel's status, or skips when it truly has no
// Landlock: the one reason a sandbox test may skip.
func landlock(t *testing.T) sandbox.Status {
	t.Helper()
	st := sandbox.Probe()
	if !st.Available() {
		t.Skipf("this kernel has no Landlock: %s", st.Reason)
	}
	return st
}

// run runs script with bash inside the sandbox of r and returns its
// combined output, its exit error and the entry's report.
func run(t *testing.T, st sandbox.Status, r sandbox.Rules, script string) (string, error, error) {
	t.Helper()
	cmd := exec.Command("/bin/bash", "-c", script)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	e, err := sandbox.Attach(cmd, r, st)
	if err != nil {
		t.Fatal(err)
	}
	startErr := cmd.Start()
	e.Started()
	if startErr != nil {
		t.Fatal(startErr)
	}
	waitErr := cmd.Wait()
	return out.String(), waitErr, e.Err()
}

func TestWritesLandOnlyBeneathTheWritableDirectories(t *testing.T) {
	st := landlock(t)
	ws, outside := t.TempDir(), t.TempDir()
	out, waitErr, entryErr := run(t, st, sandbox.Rules{Writable: []string{ws}, Network: sandbox.NetworkOn}, fmt.Sprintf(
		`echo in > %[1]s/a && mkdir %[1]s/d && mv %[1]s/a %[1]s/d/a && echo ok
echo out > %[2]s/b || echo refused
cat /etc/hostname >/dev/null && echo read
echo x > /dev/null && echo devnull`, ws, outside))
	if entryErr != nil || waitErr != nil {
		t.Fatalf("entry %v, exit %v: %s", entryErr, waitErr, out)
	}
	for _, want := range []string{"ok", "refused", "read", "devnull"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(ws, "d", "a")); err != nil || string(b) != "in\n" {
		t.Errorf("the write (and move) inside did not land: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(outside, "b")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was written outside the writable directories: %v", err)
	}
}

// dialScript connects to port with bash's /dev/tcp (a plain TCP socket).
func dialScript(port int) string {
	return fmt.Sprintf(`exec 3<>/dev/tcp/127.0.0.1/%d && echo connected || echo refused`, port)
}

func listen(t *testing.T) (net.Listener, int) {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, l.Addr().(*net.TCPAddr).Port
}

func TestNetworkOffRefusesATCPConnect(t *testing.T) {
	st := landlock(t)
	if st.Check(sandbox.Rules{}) != nil {
		t.Skipf("this kernel cannot restrict TCP: %s", st)
	}
	_, port := listen(t)
	out, _, entryErr := run(t, st, sandbox.Rules{Writable: []string{t.TempDir()}}, dialScript(port))
	if entryErr != nil {
		t.Fatal(entryErr)
	}
	if !strings.Contains(out, "refused") || strings.Contains(out, "connected") {
		t.Fatalf("the connection was not refused:\n%s", out)
	}
}

func TestNetworkOnAllowsATCPConnect(t *testing.T) {
	st := landlock(t)
	l, port := listen(t)
	accepted := make(chan error, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			c.Close()
		}
		accepted <- err
	}()
	out, _, entryErr := run(t, st, sandbox.Rules{Writable: []string{t.TempDir()}, Network: sandbox.NetworkOn}, dialScript(port))
	if entryErr != nil {
		t.Fatal(entryErr)
	}
	if !strings.Contains(out, "connected") {
		t.Fatalf("the connection was refused with the network on:\n%s", out)
	}
	if err := <-accepted; err != nil {
		t.Fatal(err)
	}
}

// TestSignalsDoNotCrossTheEdge: the sandboxed shell cannot signal dsh
// (here the test process), from ABI 6 on.
func TestSignalsDoNotCrossTheEdge(t *testing.T) {
	st := landlock(t)
	if st.ABI < 6 {
		t.Skipf("signal scoping needs Landlock ABI 6; this kernel has %d", st.ABI)
	}
	out, _, entryErr := run(t, st, sandbox.Rules{Writable: []string{t.TempDir()}, Network: sandbox.NetworkOn},
		fmt.Sprintf(`kill -0 %d && echo reached || echo blocked; sleep 0 & kill -0 $! && echo own`, os.Getpid()))
	if entryErr != nil {
		t.Fatal(entryErr)
	}
	if !strings.Contains(out, "blocked") || !strings.Contains(out, "own") {
		t.Fatalf("want the host blocked and the shell's own child reachable:\n%s", out)
	}
}

// TestAnABIBeyondTheKernelFailsLoudly: asked for an ABI the kernel lacks,
// the child refuses to run the program rather than run it less confined.
func TestAnABIBeyondTheKernelFailsLoudly(t *testing.T) {
	st := landlock(t)
	if st.ABI >= 11 {
		t.Skip("the kernel offers every ABI this build knows")
	}
	ws := t.TempDir()
	st.ABI = 11
	out, waitErr, entryErr := run(t, st, sandbox.Rules{Writable: []string{ws}}, "touch "+ws+"/ran")
	var e *errs.Error
	if !errors.As(entryErr, &e) || e.Code != sandbox.EntryFailed {
		t.Fatalf("want %s, got %v (exit %v, output %q)", sandbox.EntryFailed, entryErr, waitErr, out)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
		t.Fatal("the program ran although the sandbox could not be entered")
	}
	t.Log(entryErr)
}

func TestCheckSaysWhatIsMissing(t *testing.T) {
	none := sandbox.Status{Reason: "not enabled at boot", NSReason: "user namespaces disabled"}
	if err := none.Check(sandbox.Rules{}); !isReason(err, "sandbox/no-namespaces") || !strings.Contains(err.Error(), "user namespaces disabled") {
		t.Fatalf("no namespaces: %v", err)
	}
	if err := none.Check(sandbox.Rules{Accept: sandbox.NoNamespaces}); !isReason(err, "sandbox/no-landlock") || !strings.Contains(err.Error(), "not enabled at boot") {
		t.Fatalf("no Landlock: %v", err)
	}
	if _, err := sandbox.Attach(exec.Command("/bin/true"), sandbox.Rules{}, none); !isCode(err, sandbox.Unavailable) {
		t.Fatalf("Attach must refuse rules the kernel cannot enforce: %v", err)
	}
	// With a network namespace, ABI 3 closes the network all the same.
	if err := (sandbox.Status{ABI: 3, Namespaces: true}).Check(sandbox.Rules{}); err != nil {
		t.Fatalf("namespaces on ABI 3: %v", err)
	}
	old := sandbox.Status{ABI: 3, NSReason: "refused"}
	landlockOnly := sandbox.Rules{Accept: sandbox.NoNamespaces}
	if err := old.Check(landlockOnly); !isReason(err, "sandbox/no-network-rules") || !strings.Contains(err.Error(), "ABI 4") {
		t.Fatalf("network off on ABI 3 without namespaces: %v", err)
	}
	if old.Effective(landlockOnly).Accept&sandbox.OpenNetwork == 0 {
		t.Fatal("on ABI 3 without namespaces the network stays open, and Effective must say so")
	}
	if d := old.Describe(landlockOnly); !strings.Contains(d, "network NOT restricted") || !strings.Contains(d, "NOT isolated: dsh's /proc") {
		t.Fatalf("Describe must name what is not isolated: %s", d)
	}
	rootNoIdmap := sandbox.Status{ABI: 7, Namespaces: true, Root: true, IdmapReason: "vfat cannot be idmapped"}
	if err := rootNoIdmap.Check(sandbox.Rules{}); !isReason(err, "sandbox/no-idmap") || !strings.Contains(err.Error(), "vfat") {
		t.Fatalf("root without idmapped mounts: %v", err)
	}
	if err := rootNoIdmap.Check(sandbox.Rules{Accept: sandbox.SameUID}); err != nil {
		t.Fatalf("accepting the same uid: %v", err)
	}
	if d := rootNoIdmap.Describe(sandbox.Rules{Writable: []string{"/w"}}); !strings.Contains(d, "kernel uid stays root (NOT isolated") {
		t.Fatalf("Describe must say the uid stays root: %s", d)
	}
	full := sandbox.Status{ABI: 7, Namespaces: true, Root: true, Idmap: true}
	if d := full.Describe(sandbox.Rules{Writable: []string{"/w"}, ReadOnly: []string{"/w/.git/config"}}); !strings.Contains(d, "kernel uid 65534") || !strings.Contains(d, "read-only everywhere but /w (read-only inside them: /w/.git/config)") || !strings.Contains(d, "network off (a network namespace") {
		t.Fatalf("the full sandbox: %s", d)
	}
	if d := (sandbox.Status{ABI: 10}).Describe(landlockOnly); !strings.Contains(d, "TCP bind/connect, UDP, abstract unix sockets, unix sockets made outside refused; not restricted: multipath TCP") {
		t.Fatalf("ABI 10 closes all Landlock can: %s", d)
	}
	for _, st := range []sandbox.Status{none, old, rootNoIdmap, full, {ABI: 11}} {
		if st.String() == "" || st.Describe(sandbox.Rules{Writable: []string{"/w"}}) == "" {
			t.Fatalf("%#v describes nothing", st)
		}
	}
	// Below ABI 9 the seccomp filter refuses unix sockets, where this
	// architecture has one.
	want := "not restricted: UDP (needs ABI 10), unix sockets made outside (needs ABI 9)"
	if entry.UnixFilter {
		want = "unix sockets made outside refused; not restricted: UDP (needs ABI 10), multipath TCP"
	}
	if d := (sandbox.Status{ABI: 7}).Describe(sandbox.Rules{Writable: []string{"/w"}, Accept: sandbox.NoNamespaces}); !strings.Contains(d, want) || !strings.Contains(d, "/w") {
		t.Fatalf("ABI 7 without namespaces must name /w and say what stays open (%s): %s", want, d)
	}
}

func isReason(err error, reason string) bool {
	var e *errs.Error
	return errors.As(err, &e) && e.Code == sandbox.Unavailable && e.Reason == reason
}

func isCode(err error, c errs.Code) bool {
	var e *errs.Error
	return errors.As(err, &e) && e.Code == c
}

// TestNoInheritedDescriptorCrossesTheEdge: Landlock checks a file when it
// is opened, so a descriptor open for writing that dsh inherited without
// close-on-exec (from a shell, a service manager, a redirection like
// 7>>file) would let the sandboxed program write a file outside. Only the
// descriptors the command was given pass.
func TestNoInheritedDescriptorCrossesTheEdge(t *testing.T) {
	st := landlock(t)
	ws, outside := t.TempDir(), t.TempDir()
	target := filepath.Join(outside, "log")
	// syscall.Open, unlike os.Open, leaves close-on-exec off, as a
	// descriptor inherited from dsh's parent would be.
	fd, err := syscall.Open(target, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	out, waitErr, entryErr := run(t, st, sandbox.Rules{Writable: []string{ws}}, fmt.Sprintf(
		`{ echo escaped >&%d; } 2>/dev/null && echo wrote || echo closed`, fd))
	if entryErr != nil || waitErr != nil {
		t.Fatalf("entry %v, exit %v: %s", entryErr, waitErr, out)
	}
	if b, _ := os.ReadFile(target); len(b) != 0 || !strings.Contains(out, "closed") {
		t.Fatalf("the sandboxed command wrote %q outside through inherited descriptor %d (%s)", b, fd, out)
	}
}
