package permission_test

import (
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
)

func TestReadOnlyCommand(t *testing.T) {
	for _, tc := range []struct {
		cmd string
		ok  bool
	}{
		{"ls -la", true},
		{"cat go.mod | grep module", true},
		{"git status && git log --oneline -5", true},
		{"git -C sub diff HEAD~1", true},
		{"sed -n 1,20p main.go", true},
		{"sed 's/a/b/' file.txt", true},
		{"find . -name '*.go' -newer x", true},
		{"grep -rn foo $(ls)", true},
		{"wc -l < main.go", true},
		{"ls > /dev/null 2>&1", true},
		{"echo $(date +%s)", true},

		{"sed -i 's/a/b/' file.txt", false},
		{"sed -ni 's/a/b/' file.txt", false},
		{"sed --in-place=.bak 's/a/b/' f", false},
		{"sed -n 's/a/b/w out.txt' f", false},
		{"sed -e 'w out.txt' f", false},
		{"sed -f script.sed f", false},
		{"sed 's/x/date/e' f", false},
		{"cat a > b", false},
		{"echo hi >> notes.md", false},
		{"rm -rf build", false},
		{"touch x", false},
		{"ls; rm x", false},
		{"find . -delete", false},
		{"find . -name x -exec rm {} +", false},
		{"git commit -m x", false},
		{"git -c core.pager=sh log", false},
		{"git diff --output=x", false},
		{"bash -c 'ls'", false},
		{"sh -c 'sed -i s/a/b/ f'", false},
		{"$CMD", false},
		{"sort -o out in", false},
		{"echo $(rm x)", false},
		{"ls | xargs rm", false},
		{"python3 -c 'print(1)'", false},
		{"uniq in out", false},
		{"tree -o out", false},
		{"date -s now", false},
		{"rg --pre cat foo", false},
		{"ls 'unterminated", false},
	} {
		ok, why := permission.ReadOnlyCommand(tc.cmd, "/work/ws")
		if ok != tc.ok {
			t.Errorf("ReadOnlyCommand(%q) = %v (%s), want %v", tc.cmd, ok, why, tc.ok)
		}
		if !ok && why == "" {
			t.Errorf("ReadOnlyCommand(%q) refused without saying why", tc.cmd)
		}
	}
}
