//go:build linux

package sandbox_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/internal/asnobody"
	"github.com/dsh-go/dsh/internal/sandbox"
)

// unixClient connects to the unix socket $1 and prints what it says, or
// why it could not; then makes a socket pair, which needs no address.
const unixClient = `perl -MSocket -e '
socket(my $s, AF_UNIX, SOCK_STREAM, 0) or print "no socket: $!\n";
if ($s && connect($s, pack_sockaddr_un($ARGV[0]))) { print scalar <$s> } elsif ($s) { print "refused: $!\n" }
socketpair(my $a, my $b, AF_UNIX, SOCK_STREAM, 0) and print "PAIR\n"' `

// TestNetworkOffRefusesAUnixSocketMadeOutside: with the network off (or
// proxied) a command must reach nothing outside, and a unix socket made
// outside is as good as the network or better: a user's D-Bus or systemd
// (systemd-run --user runs anything outside the sandbox), tmux, an ssh
// master, docker. Landlock refuses them from ABI 9; below, the command
// makes no unix socket at all. A socket pair still works, and with the
// network on the socket is reached, so the client is known to work. Run
// as root (the command is uid 65534 and the socket open to it) and as
// nobody (the command has the socket owner's own uid).
func TestNetworkOffRefusesAUnixSocketMadeOutside(t *testing.T) {
	st := landlock(t)
	if os.Geteuid() == 0 && os.Getenv("SANDBOX_AS_NOBODY") == "" {
		defer asnobody.Run(t, "TestNetworkOffRefusesAUnixSocketMadeOutside", "SANDBOX_AS_NOBODY=1")
	}
	dir, err := os.MkdirTemp("", "dsh-unix-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// Open to the command's uid, as a user's own sockets are to it.
	for _, p := range []string{dir, sock} {
		if err := os.Chmod(p, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	served := make(chan struct{})
	go func() {
		defer close(served)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Write([]byte("REACHED-OUTSIDE\n"))
			c.Close()
		}
	}()
	defer func() { l.Close(); <-served }()
	for _, n := range []sandbox.Network{sandbox.NetworkOff, sandbox.NetworkProxied, sandbox.NetworkOn} {
		if n == sandbox.NetworkProxied && !st.Namespaces {
			continue
		}
		r := sandbox.Rules{Writable: []string{t.TempDir()}, Network: n}
		out, waitErr, entryErr := run(t, st, r, unixClient+sock)
		if entryErr != nil || waitErr != nil {
			t.Fatalf("network %q: entry %v, exit %v: %s", n, entryErr, waitErr, out)
		}
		reached := strings.Contains(out, "REACHED-OUTSIDE")
		if reached != (n == sandbox.NetworkOn) || !strings.Contains(out, "PAIR") {
			t.Errorf("network %q: reached the socket outside: %v, want %v; a socket pair must work:\n%s", n, reached, n == sandbox.NetworkOn, out)
		}
		// The opt-out gives unix sockets back, those outside included,
		// and the sandbox's description says so.
		r.UnixSockets = true
		out, waitErr, entryErr = run(t, st, r, unixClient+sock)
		if entryErr != nil || waitErr != nil {
			t.Fatalf("network %q, unix sockets on: entry %v, exit %v: %s", n, entryErr, waitErr, out)
		}
		// From Landlock ABI 9 the sockets outside stay refused: only
		// kernels before it need, and get, the opt-out's trade.
		const landlockScopesUnix = 9
		if st.ABI >= landlockScopesUnix {
			continue
		}
		if !strings.Contains(out, "REACHED-OUTSIDE") {
			t.Errorf("network %q with UnixSockets: the command made no unix socket:\n%s", n, out)
		}
		if d := st.Describe(r); n != sandbox.NetworkOn && st.Namespaces && !strings.Contains(d, "NOT refused") {
			t.Errorf("network %q with UnixSockets: the description does not say unix sockets are open: %s", n, d)
		}
	}
}

// ioURingClient asks for an io_uring ($1 is nothing): its requests are
// not system calls, so a seccomp filter never sees an IORING_OP_SOCKET
// (Linux 5.19) make a unix socket and IORING_OP_CONNECT reach one outside.
const ioURingClient = `perl -e '
my $params = "\0" x 120;
my $fd = syscall(425, 4, $params);
print $fd < 0 ? "no io_uring: $!\n" : "IO_URING\n"'`

// TestNoUnixSocketsRefusesIoUring: where the command may make no unix
// socket (the network not on, Landlock before ABI 9), it may not set up
// an io_uring either, whose socket and connect operations bypass the
// filter on socket(2). With the network on it gets one, so the client is
// known to work; so it does from Landlock ABI 9, which needs no filter.
func TestNoUnixSocketsRefusesIoUring(t *testing.T) {
	st := landlock(t)
	const landlockScopesUnix = 9
	for _, n := range []sandbox.Network{sandbox.NetworkOff, sandbox.NetworkProxied, sandbox.NetworkOn} {
		if n == sandbox.NetworkProxied && !st.Namespaces {
			continue
		}
		r := sandbox.Rules{Writable: []string{t.TempDir()}, Network: n}
		out, waitErr, entryErr := run(t, st, r, ioURingClient)
		if entryErr != nil || waitErr != nil {
			t.Fatalf("network %q: entry %v, exit %v: %s", n, entryErr, waitErr, out)
		}
		if got, want := strings.Contains(out, "IO_URING"), n == sandbox.NetworkOn || st.ABI >= landlockScopesUnix; got != want {
			t.Errorf("network %q: got an io_uring: %v, want %v:\n%s", n, got, want, out)
		}
	}
}
