package permission_test

import (
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// unknownWrapperRm run rm through a program that runs another program
// or a program text: the reviewer's list (issue C).
var unknownWrapperRm = []string{
	"setpriv rm f", "prlimit rm f", "numactl -a rm f", "cgexec -g cpu:x rm f", "xvfb-run rm f", "torsocks rm f",
	"proxychains rm f", "bwrap --bind / / rm f", "chpst rm f", "valgrind rm f", "perf stat rm f", "eatmydata rm f",
	"faketime x rm f", "dbus-run-session rm f", "catchsegv rm f", "softlimit rm f", "daemonize /bin/rm f",
	"run-one rm f", "sem rm f", "nocache rm f", "sg g -c 'rm f'", "sg g 'rm f'", "gdb -ex 'shell rm f'",
	"gdb -ex '!rm f'", "expect -c 'spawn rm f'", `awk 'BEGIN{system("rm f")}'`, `awk '{print | "sh"}' x`,
	"sed -n '1e rm f' x", "sed 's/x/rm f/e' x", "sed -e p -e '1e rm f' x", "sed --expression='1 e rm f' x",
	"sed -ne '$e rm f' x", "sed -i.tmpfile '1e rm f' x", "sed \"$S\" x", "cp /bin/rm /tmp/x", "docker rm x", "git bisect run rm f", "git rebase -x 'rm f' main", "git rebase --exec='make && rm f' main",
	"git submodule foreach --recursive 'rm f'", "git filter-branch --tree-filter 'rm f' HEAD", `git rebase -x "$X" main`, `/usr/bin/[a]wk 'BEGIN{system("rm f")}'`, "git -C . bisect run /bin/rm f", "git -c core.sshCommand='rm f' fetch", "git -c alias.x='!rm f' x",
	"git -c core.pager='rm f' log", "git -c core.hooksPath=h commit", "git --config-env=core.sshCommand=X fetch",
	// Programs in no table: the word rm is enough.
	"some-new-wrapper --flag rm f", "/opt/x/bin/runner /usr/bin/rm f", "sg g -c \"$X\"",
}

// TestUnknownWrappersMeetTheDenyRule: under {command: "rm *", decision:
// deny} each line above is denied by that rule, in every mode.
func TestUnknownWrappersMeetTheDenyRule(t *testing.T) {
	deny := []permission.Rule{{Command: "rm *", Decision: tools.Deny}}
	for _, mode := range []permission.Mode{"", permission.FullAccess} {
		root := policyOf(t, permission.Config{Mode: mode, Rules: deny})
		for _, command := range unknownWrapperRm {
			if v := bash(root, t, command); v.Decision != tools.Deny || v.Source != "tools.permission:rules[0]" {
				t.Errorf("mode %q: %q: got %+v, want the rm rule's deny", mode, command, v)
			}
		}
	}
}

// TestProgramTextsWithoutCommandsStayPrecise: awk, sed, gdb, expect and git
// whose text runs nothing, and programs that never run their arguments
// (echo rm, grep rm x, man rm, git rm), keep their verdict under the rm
// deny rule.
func TestProgramTextsWithoutCommandsStayPrecise(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{{Command: "rm *", Decision: tools.Deny}}})
	for _, command := range []string{
		"awk '{print $1}' x", "awk -F: '$3 > 1000 {n++} END {print n}' /etc/passwd", "sed 's/a/b/g' x", "sed -n '1,5p' x",
		"sed -i -e 's/old/new/' -e '/^$/d' x", "sed '/x/{s/a/b/;p}' f", "sed 's/e/E/g' x", "sed -E 's/(x)+/y/' f",
		"git -c user.name=x commit -m m", "git -c color.ui=always log", "git rm -f x", "git -c core.pager=cat log", "git -c core.editor='vim -n' commit", "git rebase -x 'make test' main", "git submodule foreach git pull", "git cherry-pick -x abc", "git clean -x -f", "git -C sub rm x", "git -c user.name=x rm x", "echo rm", "grep rm x",
		"man rm", "which rm", "command -v rm", "type rm", "printf '%s\\n' rm", "gdb -batch -ex bt ./a.out core",
		"expect -v", "ls rm", "perf stat ls", `sed -e 's/a/b/' "$F"`, `sed -i.bak 's/a/b/' "$F"`, "sed -n -f script.sed x",
		"PAGER=cat git log", "GIT_EDITOR='vim -n' git commit", "GIT_CONFIG_GLOBAL=/dev/null git status", "EDITOR= git commit",
		"git grep -i x", "git grep -O x", "git push -u origin main", "git add -u", "git clone https://x/r d", "git config user.name x",
		`read -r -p "$prompt" x`, `read -t "$t" -r x`, "echo ${!a[@]}", "echo ${!pre*}", `declare x="$y"`, `export PATH="$PATH:/x"`, "unset x", "mapfile -t lines < f",
		"git config --global core.pager cat", "git config alias.st status", "git difftool -y HEAD", "git --exec-path",
		"tar -xzf a.tgz", "tar -cf x.tar -C dir .", "tar --zstd -cf x .", "tar -I zstd -cf x .", "tar xf a.tar", "tar --checkpoint=10 --checkpoint-action=dot -cf x .",
		"rsync -av a/ b/", "rsync -e ssh a h:b", "rsync --rsh='ssh -p 22' a h:b",
		`PS4='+${BASH_SOURCE}:${LINENO}: ' bash -x -c true`, "SUDO_EDITOR=vim sudoedit x",
		"zip -r x.zip a", "zip -T x.zip a", "read -r line < f", `printf -v out '%s' x`, "for f in *.go; do gofmt -l $f; done", `echo "${EDITOR:-vi}"`,
		"GIT_EDITOR='vim -n'; export GIT_EDITOR; git commit",
	} {
		if v := bash(root, t, command); v.Decision != tools.Allow {
			t.Errorf("%q: got %+v, want allow", command, v)
		}
	}
}

// TestANamedProgramWordFailsClosedOnlyForDenyAndAsk: an allow rule is
// never widened by the word rule; an ask rule is met like a deny rule.
func TestANamedProgramWordFailsClosedOnlyForDenyAndAsk(t *testing.T) {
	root := policyOf(t, permission.Config{Rules: []permission.Rule{
		{Command: "curl *", Decision: tools.Ask},
		{Command: "make *", Decision: tools.Allow},
	}})
	if v := bash(root, t, "mytool --x curl x"); v.Decision != tools.Ask || v.Source != "tools.permission:rules[0]" {
		t.Errorf("mytool --x curl x: got %+v, want the curl rule's ask", v)
	}
	if v := bash(root, t, "mytool make all"); v.Decision == tools.Allow {
		t.Errorf("mytool make all: allowed by the make rule: %+v", v)
	}
	git := policyOf(t, permission.Config{Rules: []permission.Rule{{Command: "git *", Decision: tools.Allow}}})
	for _, command := range []string{"git cherry-pick -x abc", "git clean -x -f", "git rm x"} {
		if v := bash(git, t, command); v.Decision != tools.Allow {
			t.Errorf("%q under git *: got %+v, want allow", command, v)
		}
	}
	if v := bash(git, t, "git rebase -x 'curl x' main"); v.Decision == tools.Allow {
		t.Errorf("git rebase -x 'curl x': allowed by git *: %+v", v)
	}
}
