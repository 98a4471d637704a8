package entry

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
)

// dropTerminal gives up the controlling terminal the entry inherited from
// dsh, so the command has none. Sharing dsh's would let it push input into
// dsh's terminal with TIOCSTI (where the kernel still allows it and
// Landlock is older than ABI 5, which refuses device ioctls), make its own
// group the foreground one and read what the person types to dsh, or
// hang up dsh's session. The entry cannot start a session of its own: it
// leads the process group childproc made for it, and setsid refuses a
// group leader; TIOCNOTTY detaches a process that does not lead its
// session from the terminal all the same, and its children are born
// without one.
func dropTerminal() error {
	if !hasTerminal() {
		return nil
	}
	fd, err := syscall.Open("/dev/tty", syscall.O_RDONLY|syscall.O_NOCTTY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	switch {
	case err == syscall.ENXIO:
		return nil // the kernel's own answer: no controlling terminal
	case err == nil:
		err := tiocnotty(fd)
		syscall.Close(fd)
		if err == nil {
			return nil
		}
	}
	// No /dev/tty to open (a minimal /dev): the terminal may still be
	// one of the standard descriptors.
	for fd := 0; fd <= 2; fd++ {
		if tiocnotty(fd) == nil {
			return nil
		}
	}
	if hasTerminal() {
		return fmt.Errorf("giving up dsh's controlling terminal: neither /dev/tty nor a standard descriptor reaches it")
	}
	return nil
}

func tiocnotty(fd int) error {
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCNOTTY, 0); e != 0 {
		return e
	}
	return nil
}

// hasTerminal reports whether this process has a controlling terminal:
// the tty_nr field of /proc/self/stat, which the kernel zeroes once it has
// none. Without /proc it answers yes, so dropTerminal tries.
func hasTerminal() bool {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return true
	}
	// The command name, in parentheses, may hold spaces: count fields
	// from its end. tty_nr is the 7th field, the 5th after the name.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return true
	}
	f := bytes.Fields(b[i+1:])
	if len(f) < 5 {
		return true
	}
	n, err := strconv.Atoi(string(f[4]))
	return err != nil || n != 0
}
