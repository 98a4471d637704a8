package shell_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
)

// kinds renders a command's words with what is known of each: a word as
// its value, a glob as g:pattern, a word known only at run time as ~ (one
// word) or ~* (any number of words).
func kinds(c shell.Command) string {
	var out []string
	for _, w := range c.Words {
		switch {
		case w.Glob:
			out = append(out, "g:"+w.Pattern)
		case w.Literal:
			out = append(out, w.Value)
		case w.Split:
			out = append(out, "~*")
		default:
			out = append(out, "~")
		}
	}
	return strings.Join(out, " ")
}

func TestWordsAreReadAsTheShellExpandsThem(t *testing.T) {
	cases := map[string]string{
		`$'\x72m' -f`:              "rm -f",
		`$'r\155' $'\u0072m'`:      "rm rm",
		`$'a\tb' $'a\0b' $'\cA'`:   "a\tb a \x01",
		`$'100%' $'\q'`:            `100% \q`,
		`gi$'\U7fffffff't`:         `gi\U7ffffffft`,
		"{rm,-f,f}":                "rm -f f",
		"{r,x}m {,}a x{,} {,}":     "rm xm a a x x",
		"{1..3}":                   "1 2 3",
		`'{a,b}' "{a,b}" \{a,b}`:   "{a,b} {a,b} {a,b}",
		"{1..100000}":              "~*",
		"/bin/r[m] *.go '*'.go":    "g:/bin/r[m] g:*.go *.go",
		`"r"m 'r''m' \rm`:          "rm rm rm",
		"@(rm|cp) x":               "g:* x",
		"$X \"$X\" \"$@\" ${a[@]}": "~* ~ ~* ~*",
		"rm${IFS}-f `echo` $((1))": "~* ~* ~*",
		`"${a[@]}" "$*" $"x"`:      "~* ~ ~",
	}
	for src, want := range cases {
		s, err := shell.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if got := kinds(s.Commands[0]); got != want {
			t.Errorf("Parse(%q): got %q, want %q", src, got, want)
		}
	}
}

func TestStandardInputOfACommand(t *testing.T) {
	cases := map[string]string{
		"sh":                         "<nil>",
		"sh < f.sh":                  "file f.sh",
		"sh <<< 'rm f'":              "text rm f",
		"sh <<< \"$X\"":              "text ~",
		"sh <<EOF\nrm \\$x\nEOF\n":   "text rm $x\n",
		"sh <<'EOF'\nrm \\$x\nEOF\n": "text rm \\$x\n",
		"sh <<EOF\n$(id)\nEOF\n":     "text ~",
		"sh <&3":                     "descriptor",
		"sh 3< f":                    "<nil>",
		"sh < a <<< b":               "text b",
		"sh < <(echo rm)":            "file ~",
	}
	for src, want := range cases {
		s, err := shell.Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		in := s.Commands[0].Stdin
		got := "<nil>"
		if in != nil {
			v := in.Value
			if !in.Literal {
				v = "~"
			}
			got = map[shell.InputKind]string{shell.FromFile: "file ", shell.FromText: "text ", shell.FromDescriptor: "descriptor"}[in.Kind]
			if in.Kind != shell.FromDescriptor {
				got += v
			}
		}
		if got != want {
			t.Errorf("Parse(%q): stdin %q, want %q", src, got, want)
		}
	}
}

func TestCodeInStringsAndAssignedNames(t *testing.T) {
	s, err := shell.Parse(`x='a[$(rm f)]'; let 'y=b[` + "`id`" + `]'; export BASH_ENV=e.sh; Z=1 true; echo '$HOME' "$(date)"`)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a[$(rm f)]", "y=b[`id`]"}; !slices.Equal(s.Code, want) {
		t.Errorf("code %q, want %q", s.Code, want)
	}
	if want := []string{"x", "BASH_ENV", "Z"}; !slices.Equal(s.Assigned, want) {
		t.Errorf("assigned %q, want %q", s.Assigned, want)
	}
}

func ExampleParse() {
	s, _ := shell.Parse(`X=rm; $X -f f && {ls,-l} | sh`)
	for _, c := range s.Commands {
		fmt.Println(kinds(c))
	}
	// Output:
	// ~* -f f
	// ls -l
	// sh
}
