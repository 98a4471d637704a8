package permission_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// pathological are command lines of up to 1 MiB built to make brace
// expansion blow up.
func pathological() map[string]string {
	const n = 1 << 19 // 512 Ki braces each way: 1 MiB
	return map[string]string{
		"nested braces":            strings.Repeat("{", n) + strings.Repeat("}", n),
		"nested braces, an arg":    "echo " + strings.Repeat("{", n) + strings.Repeat("}", n),
		"nested alternatives":      strings.Repeat("{a,", n/3) + strings.Repeat("}", n/3),
		"many braces in a word":    strings.Repeat("x{a,b}", n/3),
		"rm in nested braces":      strings.Repeat("{", n/2) + "rm,f" + strings.Repeat("}", n/2),
		"a long word with a brace": "echo {a,b}" + strings.Repeat("x", 2*n),
		"many brace words":         "echo" + strings.Repeat(" {a,b}", n/6),
		// Each xargs is a wrapper whose command is another, and
		// substitutes words the outer ones did not.
		"nested xargs":    strings.Repeat("xargs ", n/6) + "env",
		"nested wrappers": strings.Repeat("sudo env nice ", n/14) + "$X",
		"a long cluster":  "env -" + strings.Repeat("v", n/8) + "S'x y'",
	}
}

// TestPathologicalLinesAreJudgedQuickly: each 1 MiB line is judged in
// well under a second (bounded at two, ten under the race detector, on a
// shared machine), and a brace word too big to expand is held to the deny rule
// when it is the program.
func TestPathologicalLinesAreJudgedQuickly(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{{Command: "rm *", Decision: tools.Deny}}})
	limit := 2 * time.Second
	if raceEnabled {
		limit = 10 * time.Second
	}
	for name, command := range pathological() {
		start := time.Now()
		v := bash(root, t, command)
		took := time.Since(start)
		t.Logf("%s (%d bytes): %s in %v", name, len(command), v.Decision, took)
		if took > limit {
			t.Errorf("%s: judged in %v", name, took)
		}
		if strings.HasPrefix(command, "{") && v.Decision != tools.Deny {
			t.Errorf("%s: got %+v, want the rm rule's deny: the program is not known", name, v)
		}
	}
}
