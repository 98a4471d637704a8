package permission_test

import (
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// subscriptRm run rm from an array subscript that bash evaluates
// (issue B): bash runs the substitution inside 'a[...]' for each of them.
var subscriptRm = []string{
	"declare 'a[$(rm f)]'=1", "typeset 'a[$(rm f)]'=1", "f(){ local 'a[$(rm f)]'=1; }; f", "readonly 'a[$(rm f)]'=1",
	"export 'a[$(rm f)]'=1", "declare -a 'a[`rm f`]'", "builtin declare 'a[$(rm f)]'=1",
	"echo $(( 'a[$(rm f)]' ))", "(( 'a[$(rm f)]' ))", "(( x = 'a[$(rm f)]' + 1 ))", "let 'a[$(rm f)]'",
	"[[ 'a[$(rm f)]' -eq 0 ]]", "[[ x -lt 'a[$(rm f)]' ]]", "[[ 1 -ge 'a[${x[$(rm f)]}]' ]]", "[[ -v 'a[$(rm f)]' ]]",
	"printf -v 'a[$(rm f)]' x", "read 'a[$(rm f)]' <<< x", "unset 'a[$(rm f)]'", "test -v 'a[$(rm f)]'",
	"[ -v 'a[$(rm f)]' ]", "for (( i = 'a[$(rm f)]'; i < 1; i++ )); do :; done", "echo ${b['a[$(rm f)]']}",
}

// TestSubscriptsAreCode: under the rm deny rule each line above is denied
// by that rule; a subscript that does not parse is opaque and meets it too.
func TestSubscriptsAreCode(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{{Command: "rm *", Decision: tools.Deny}}})
	for _, command := range append(subscriptRm, "declare 'a[$(rm f]'=1", "(( 'a[$(ls'\"'\"'x)]' ))") {
		if v := bash(root, t, command); v.Decision != tools.Deny || v.Source != "tools.permission:rules[0]" {
			t.Errorf("%q: got %+v, want the rm rule's deny", command, v)
		}
	}
	for _, command := range []string{
		"declare -a a=(1 2)", "declare 'a[1]'=x", "printf -v x '%s' y",
		"read -r line", "unset 'a[1]'", "test -v 'a[0]'", "echo $(( 1 + 2 ))", "echo $(( a[1] ))",
		"declare 'a[${i}]'=1",
	} {
		if v := bash(root, t, command); v.Decision != tools.Allow {
			t.Errorf("%q: got %+v, want allow", command, v)
		}
	}
}
