package permission_test

import (
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// oddWrappers are the wrappers and code runners whose words are read for
// the command they run: each is tried alone, with a redirection, after a
// pipe and with a dangling option, where a reader that assumes a next
// word would index past the end.
var oddWrappers = []string{
	"env", "nice", "time", "exec", "command", "builtin", "sudo", "doas", "xargs", "find", "timeout", "stdbuf",
	"taskset", "chrt", "ionice", "flock", "ssh", "strace", "ltrace", "fakeroot", "watch", "chroot", "su",
	"nohup", "setsid", "busybox", "eval", "trap", "source", ".", "alias", "hash", "mapfile", "bash", "sh",
	"setpriv", "prlimit", "numactl", "cgexec", "bwrap", "perf", "faketime", "sg", "gdb", "expect", "awk", "sed", "git",
	"declare", "local", "export", "readonly", "typeset", "printf", "read", "unset", "test", "[", "let",
}

// oddLines are the reviewer's lines that panicked, and others as short.
var oddLines = []string{
	"env", "nice", "env | sort", "exec 2>&1; ls", "exec >log", "nice >x", "env 2>/dev/null", "time", "time;",
	"command", "sudo", "xargs", "find", "timeout", "timeout 5", "nice -n", "env -u", "env -S", "sudo -u",
	"flock", "flock f", "flock f -c", "ssh", "ssh -o", "find -exec", "find . -exec", "xargs -I", "xargs -I{}",
	"taskset -c", "exec -a", "[", "[ -v", "test -v", "declare", "printf -v", "read", "let", "(( ))", "$(( ))",
	"[[ -v a ]]", "''", `""`, "-", "--", "env --", "sudo --", "timeout --", "=", "a=", "env a=",
}

// TestShortAndOddCommandsAreJudged: a wrapper alone, with only options or
// with a redirection is judged like any command, not a panic that ends
// the turn.
func TestShortAndOddCommandsAreJudged(t *testing.T) {
	root := policyOf(t, permission.Config{Rules: []permission.Rule{{Command: "rm *", Decision: tools.Deny}}})
	lines := append([]string(nil), oddLines...)
	for _, w := range oddWrappers {
		lines = append(lines, w, w+" >out", w+" 2>&1", "ls | "+w, w+" -", w+" --", w+" -x", w+" $X", w+"; ls")
	}
	for _, command := range lines {
		if v := bash(root, t, command); v.Decision == "" {
			t.Errorf("%q: no decision: %+v", command, v)
		}
	}
	for _, command := range []string{"env", "nice", "env | sort", "exec 2>&1; ls", "time", "command", "timeout"} {
		if v := bash(root, t, command); v.Decision == tools.Deny {
			t.Errorf("%q: got %+v, want it not denied: it runs no rm", command, v)
		}
	}
}

// FuzzJudgeBash judges arbitrary command lines under deny, ask and allow
// rules; any panic fails. In CI it runs the seeds below.
func FuzzJudgeBash(f *testing.F) {
	for _, s := range oddLines {
		f.Add(s)
	}
	for _, s := range oddWrappers {
		f.Add(s)
	}
	for _, s := range runTimeRm {
		f.Add(s)
	}
	root := policyOf(f, permission.Config{Mode: permission.WorkspaceWrite, Rules: []permission.Rule{
		{Command: "rm *", Decision: tools.Deny},
		{Command: "curl *", Decision: tools.Ask},
		{Command: "git *", Decision: tools.Allow},
	}})
	f.Fuzz(func(t *testing.T, command string) {
		if v := bash(root, t, command); v.Decision == "" {
			t.Errorf("%q: no decision: %+v", command, v)
		}
	})
}
