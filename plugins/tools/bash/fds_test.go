//go:build linux

package bash_test

import (
	"strings"
	"testing"
)

// TestOnlyTheStandardDescriptorsReachTheCommand: the host pipe childproc
// hands every child as descriptor 3 is closed in the sandbox, and
// DSH_HOST_FD, which names it, is not in the command's environment: the
// sandbox ends with dsh by its own means, and a descriptor of dsh's is
// one more thing the command could reach.
func TestOnlyTheStandardDescriptorsReachTheCommand(t *testing.T) {
	a := start(t, isolated(t, nil))
	// A plain ls of the shell's descriptors: a glob would show the one
	// the shell reads the directory through, a pipe the pipe's.
	r := a.run(t.Context(), `ls -1 /proc/$$/fd; echo "HOSTFD=${DSH_HOST_FD-unset}"`)
	fds, _, ok := strings.Cut(r.Content, "HOSTFD=")
	if !ok || !strings.HasPrefix(fds, "0\n1\n2\n") {
		t.Fatalf("the listing did not run:\n%s", r.Content)
	}
	if fds != "0\n1\n2\n" {
		t.Errorf("descriptors beyond 0-2 are open in the command:\n%s", r.Content)
	}
	if !strings.Contains(r.Content, "HOSTFD=unset") {
		t.Errorf("DSH_HOST_FD is in the command's environment:\n%s", r.Content)
	}
}
