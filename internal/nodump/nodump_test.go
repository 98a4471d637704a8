//go:build linux

package nodump_test

import (
	"os"
	"os/exec"
	"strconv"
	"testing"

	"github.com/dsh-go/dsh/internal/asnobody"
	"github.com/dsh-go/dsh/internal/nodump"
)

// readParent has a child of this process, with its user, read this
// process's environment through /proc.
func readParent(t *testing.T) error {
	t.Helper()
	return exec.Command("cat", "/proc/"+strconv.Itoa(os.Getpid())+"/environ").Run()
}

// TestSealClosesEnvironToTheSameUser: before Seal a child of the same
// ordinary user reads this process's environment; after, it cannot,
// while the process still reads its own descriptors and executable.
// Root's children pass by their capabilities, so the test runs as nobody.
func TestSealClosesEnvironToTheSameUser(t *testing.T) {
	if os.Geteuid() == 0 {
		asnobody.Run(t, "TestSealClosesEnvironToTheSameUser")
		return
	}
	if nodump.Sealed() {
		t.Fatal("the process is non-dumpable before Seal: the test proves nothing")
	}
	if err := readParent(t); err != nil {
		t.Fatalf("before Seal the child cannot read the environment either (%v): the test proves nothing", err)
	}
	if err := nodump.Seal(); err != nil {
		t.Fatal(err)
	}
	if !nodump.Sealed() {
		t.Fatal("Seal returned but the process is still dumpable")
	}
	if err := readParent(t); err == nil {
		t.Fatal("after Seal a child of the same user still reads the environment")
	}
	if _, err := os.ReadDir("/proc/self/fd"); err != nil {
		t.Fatalf("the sealed process cannot list its own descriptors: %v", err)
	}
	if _, err := os.Readlink("/proc/self/exe"); err != nil {
		t.Fatalf("the sealed process cannot find its own executable: %v", err)
	}
}
