package shell_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
)

// TestBraceWordsPastTheBoundAreUnknown: a word with more than 64 braces,
// or longer than 4 KiB with one, is not expanded but read as unknown;
// one at the bound still is.
func TestBraceWordsPastTheBoundAreUnknown(t *testing.T) {
	cases := map[string]string{
		"echo " + strings.Repeat("{", 65) + strings.Repeat("}", 65): "echo ~*",
		"echo {a,b}" + strings.Repeat("x", 4096):                    "echo ~*",
		"echo " + strings.Repeat("{a}", 64) + "{r,s}m":              "echo ~*",
		"echo " + strings.Repeat("{a}", 63) + "{r,s}m":              "echo " + strings.Repeat("{a}", 63) + "rm " + strings.Repeat("{a}", 63) + "sm",
	}
	for src, want := range cases {
		s, err := shell.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(s.Commands[0]); got != want {
			t.Errorf("%.40q...: got %q, want %q", src, got, want)
		}
	}
}

// TestSubscriptsThatRunCodeAreReported: the literal words bash evaluates
// as a name or as arithmetic, with a subscript holding a substitution.
func TestSubscriptsThatRunCodeAreReported(t *testing.T) {
	for src, want := range map[string][]string{
		"declare 'a[$(x)]'=1":           {"a[$(x)]=1"},
		"echo $(( 'a[`x`]' + 1 ))":      {"a[`x`]"},
		"[[ 1 -le 'a[${b[$(x)]}]' ]]":   {"a[${b[$(x)]}]"},
		"builtin printf -v 'a[$(x)]' y": {"a[$(x)]"},
		"echo 'a[$(x)]'":                nil,
		"[[ 'a[$(x)]' == y ]]":          nil,
		"declare 'a[1]'=$(x)":           nil,
	} {
		s, err := shell.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Subscripts, want) {
			t.Errorf("%q: got %q, want %q", src, s.Subscripts, want)
		}
	}
}
