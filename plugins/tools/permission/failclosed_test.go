package permission_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// runTimeRm are command lines that run rm although rm is named only at
// run time, hidden in quoting, a glob or braces, behind a wrapper, or in
// code a shell, eval or trap runs. issue 28 lists the first ones.
var runTimeRm = []string{
	// The program is named at run time.
	"X=rm; $X -f f",
	`"$(echo rm)" -f f`,
	`"$(which rm)" -rf f`,
	"rm${IFS}-f${IFS}f",
	"`echo rm` -f f",
	"${X:-rm} -f f",
	`"$(printf rm)" f`,
	`"${CMD[@]}" f`,
	`"$@"`,
	"$((1)) f",
	"while read c; do $c; done < list",
	// Quoting, $'...', braces, globs and paths.
	`$'\x72m' -f f`,
	`$'r\155' -f f`,
	`$'\u0072m' -f f`,
	"{rm,-f,f}",
	"{r,x}m -f f",
	"{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}{m,n} f",
	"/bin/r[m] -f f",
	"/bin/r? -f f",
	"/usr/*/rm -f f",
	"/bin/@(rm|cp) -f f",
	`\rm -f f`,
	"'r''m' -f f",
	`"r"m -f f`,
	"/usr/bin/rm -f f",
	"./rm -f f",
	// Code a shell, eval, trap or source runs.
	"trap 'rm -f f' EXIT",
	`trap "$X" EXIT`,
	"echo rm -f f | sh",
	"echo rm -f f | bash -s",
	"sh <<< 'rm -f f'",
	"bash <<EOF\nrm -f f\nEOF\n",
	"bash <<'EOF'\nrm -f f\nEOF\n",
	"sh < <(echo rm -f f)",
	". <(echo rm -f f)",
	"source /dev/stdin <<< 'rm -f f'",
	"bash <(echo rm -f f)",
	"bash /dev/stdin <<< 'rm f'",
	"bash -- /dev/fd/3 3<<< 'rm f'",
	"echo 'rm -f f' > s.sh; bash s.sh",
	"printf 'rm f' | tee run.sh >/dev/null && . ./run.sh",
	`eval "$X"`,
	"eval 'rm -f f'",
	"eval rm -f f",
	"bash -c 'rm -f f'",
	"bash -lc 'rm -f f'",
	"sh -ec 'rm -f f'",
	"bash -o errexit -c 'rm -f f'",
	`bash -c "$X"`,
	"zsh -c 'rm f'",
	"/bin/[s]h -c 'ls'",
	"builtin eval 'rm f'",
	"x='a[$(rm -f f)]'; (( x ))",
	"let 'y=a[$(rm -f f)]'",
	"hash -p /bin/rm ls; ls f",
	"eval -- 'rm f'",
	"bash -s -- a <<< 'rm f'",
	"bash -s -- a.sh",
	"echo 'rm f' > e.sh; BASH_ENV=e.sh bash -c true",
	"export BASH_ENV=./e.sh; bash -c true",
	"env 'BASH_FUNC_ls%%=() { rm f; }' bash -c ls",
	"PS4='$(rm f)' bash -xc true",
	"ssh localhost rm -f f",
	"f(){ rm \"$@\"; }; f x",
	"alias x='rm -f'\nx f",
	// Wrappers.
	"env rm -f f",
	"env -i PATH=/bin rm f",
	"env -S 'rm -f f'",
	"command rm -f f",
	"command -p rm f",
	"builtin rm f",
	"exec rm -f f",
	"exec -a name rm f",
	"nohup rm -f f",
	"time rm -f f",
	"nice -n 5 rm f",
	"timeout 5 rm f",
	"timeout -s KILL 5 sudo env nice rm f",
	"stdbuf -o0 rm f",
	"sudo rm f",
	"sudo -u bob rm f",
	"sudo -s",
	"sudo -s <<< 'ls'",
	`sudo "$X" f`,
	"doas rm f",
	"su -c 'rm -f f'",
	"su - root",
	"watch 'rm -f f'",
	"busybox rm -f f",
	"busybox sh -c 'rm f'",
	"ls | xargs rm",
	"echo f | xargs -0 rm -f",
	"echo 'rm f' | xargs sh -c",
	"echo 'rm f' | xargs -I{} sh -c '{}'",
	`find . -name f -exec rm {} \;`,
	"find . -execdir rm -f {} +",
	`find . -exec $X {} \;`,
	`find . "$E" rm f \;`,
	`find . -exec {} \;`,
	"timeout 5 $X f",
	"timeout --foreground 5 $X f",
	"nice -n 5 $X",
	"env A=1 $X",
	"sudo -u bob $X",
	"xargs -n 1 $X",
	"ssh -p 22 host $X",
	`flock f -c "$X"`,
	`env -S "$X"`,
	`ssh -o "$X" host`,
	"ssh -o 'ProxyCommand=rm f' host",
	`su -c "$X"`,
	// A wrapper that is a wrapper's command, judged by its own syntax:
	// its command may be a word the outer one takes for an argument, or
	// an item xargs appends.
	`sudo env "$X" f`,
	`timeout 5 nice "$X" f`,
	"sudo -u bob nice -n 5 $X f",
	"echo rm f | xargs env",
	"echo rm f | xargs -L1 env",
	"echo rm f | xargs timeout 5",
	"echo rm f | sudo xargs env",
	`find . -exec env {} \;`,
	"sudo find . -exec nice {} +",
	"sudo xargs -I{} env {} f",
	// A variable whose value a program runs as a command line.
	"GIT_EDITOR='rm f' git commit",
	"export GIT_SSH_COMMAND='rm f'; git fetch",
	"env GIT_PAGER='rm f' git log",
	`GIT_EXTERNAL_DIFF="$X" git diff`,
	"declare -x EDITOR='rm f'; crontab -e",
	"LESSOPEN='|rm f %s' less x",
	"SUDO_EDITOR='rm f' sudoedit x",
	"SUDO_EDITOR='rm f' sudo -e x",
	"RSYNC_RSH='rm f' rsync a h:b",
	"KUBE_EDITOR='rm f' kubectl edit x",
	"PS4='$(rm f)' bash -x -c true",
	// Program options whose value the program runs as a command line.
	"tar -I 'rm f' -cf x .",
	"tar -cI'rm f' -f x .",
	"tar --use-compress-program='rm f' -cf x .",
	"tar --use-compress 'rm f' -cf x .",
	"tar --to-command='rm f' -xf a.tar",
	"tar --checkpoint-action=exec='rm f' -cf x .",
	"tar --checkpoint-action 'exec=rm f' -cf x .",
	`tar -I "$X" -cf x .`,
	"tar cIf 'rm f' x .",
	"rsync -e 'rm f' a h:b",
	"rsync --rsh='rm f' a h:b",
	"zip -T -TT 'rm f' x.zip a",
	"zip -T --unzip-command='rm f' x.zip a",
	// A command variable set other than by an assignment.
	"printf -v GIT_EDITOR 'rm f'; export GIT_EDITOR; git commit",
	"read -r GIT_EDITOR <<< 'rm f'; export GIT_EDITOR; git commit",
	"mapfile -t GIT_EDITOR <<< 'rm f'; export GIT_EDITOR; git commit",
	"for EDITOR in 'rm f'; do export EDITOR; crontab -e; done",
	": ${EDITOR:='rm f'}; export EDITOR; crontab -e",
	"declare -n r=EDITOR; r='rm f'; export EDITOR; crontab -e",
	"GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=core.sshCommand GIT_CONFIG_VALUE_0='rm f' git fetch",
	// git options whose value git runs through the shell.
	"git ls-remote --upload-pack 'rm f' .",
	"git fetch --upload-pack='rm f' ../r",
	"git clone -u 'rm f' ../r d",
	"git push --receive-pack='rm f' ../r",
	"git archive --exec='rm f' --remote=../r HEAD",
	"git difftool -y -x 'rm f'",
	"git difftool --extcmd='rm f'",
	"git grep -O'rm f' x",
	"git grep --open-files-in-pager='rm f' x",
	"git --exec-path=/tmp/x status",
	"git config alias.st '!rm f'",
	"git config --global core.pager 'rm f'",
	`git config core.editor "$X"`,
	// A prompt expansion runs the substitutions its variable holds.
	"read -r x < f; echo ${x@P}",
	`y="${x@P}"`,
	// A name known only at run time that bash evaluates: a[$(rm f)].
	"read -r x < f; echo ${!x}",
	`read -r x < f; declare "$x"=1`,
	`read -r x < f; unset "$x"`,
	`read -r x < f; printf -v "$x" 1`,
	`read -r x < f; test -v "$x"`,
	"read -r x < f; [[ -v $x ]]",
	`read -r x < f; let "$x"`,
	// An option's value attached to its letter, after other letters.
	`env -S"rm f"`,
	"env -vS'rm f'",
	"env -iS'rm -f f'",
	"script -qc'rm f' /dev/null",
	"su -c'rm f'",
	"env -" + strings.Repeat("v", 20) + "S'rm f'",
	"coproc rm f",
	"sudo " + strings.Repeat("word ", 70) + "&& true",
	// Everywhere in a line.
	"ls; rm f",
	"cat <(rm -f f)",
	"echo $(rm -f f)",
	"if true; then rm f; fi",
	"{ rm f; }",
	"git status 'unterminated",
}

// TestDenyRulesFailClosed: with {command: "rm *", decision: deny} every
// line above is denied by that rule in every mode. An ask would let
// `dsh run --allow bash` or --yolo run it: both answer asks, never denies.
func TestDenyRulesFailClosed(t *testing.T) {
	deny := []permission.Rule{{Command: "rm *", Decision: tools.Deny}}
	for _, mode := range []permission.Mode{"", permission.WorkspaceWrite, permission.FullAccess} {
		root := policyOf(t, permission.Config{Mode: mode, Rules: deny})
		for _, command := range runTimeRm {
			v := bash(root, t, command)
			if v.Decision != tools.Deny || (v.Source != "tools.permission:rules[0]" && v.Source != "tools.permission:parse") {
				t.Errorf("mode %q: %q: got %+v, want the rm rule's deny", mode, command, v)
			}
		}
	}
}

// TestARuleThatDeniesAnExactCommandFailsClosedToo: a word that may become
// several words ($X, "$@", a glob) is matched as any number of words, so
// a rule without a final * meets it too.
func TestARuleThatDeniesAnExactCommandFailsClosedToo(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{{Command: "rm -rf /", Decision: tools.Deny}}})
	for _, command := range []string{"rm $FLAGS /", "rm -rf $ROOT", "rm -[r]f /", "rm {-rf,/}", `"$X"`, "rm $EMPTY -rf /", "sudo rm -rf /", "bash -c 'rm -rf /'"} {
		if v := bash(root, t, command); v.Decision != tools.Deny {
			t.Errorf("%q: got %+v, want deny", command, v)
		}
	}
	for _, command := range []string{"rm -rf /tmp/x", "rm -f /", "rm -rf / x", "ls -rf /"} {
		if v := bash(root, t, command); v.Decision != tools.Allow {
			t.Errorf("%q: got %+v, want allow: the rule does not match it", command, v)
		}
	}
}

// TestAnAskRuleFailsClosedToAsk: opaque code meets ask rules as it meets
// deny rules; the strictest rule it could match decides.
func TestAnAskRuleFailsClosedToAsk(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{
		{Command: "curl *", Decision: tools.Ask},
		{Command: "git *", Decision: tools.Allow},
	}})
	for _, command := range []string{"$X evil.sh", "echo curl x | sh", "eval \"$Y\"", "{curl,x}", "sudo curl x"} {
		if v := bash(root, t, command); v.Decision != tools.Ask || v.Source != "tools.permission:rules[0]" {
			t.Errorf("%q: got %+v, want the curl rule's ask", command, v)
		}
	}
	deny := policyOf(t, permission.Config{Rules: []permission.Rule{
		{Command: "curl *", Decision: tools.Ask},
		{Command: "rm *", Decision: tools.Deny},
	}})
	if v := bash(deny, t, "$X f"); v.Decision != tools.Deny || v.Source != "tools.permission:rules[1]" {
		t.Errorf("the deny rule after the ask rule: got %+v", v)
	}
}

// TestARuleThatCouldMatchIsHeldBeforeTheOneThatDoes: the first rule a
// command surely matches decides, unless one before it that it could
// match is stricter; the mode never decides a command a rule surely
// matches.
func TestARuleThatCouldMatchIsHeldBeforeTheOneThatDoes(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.ReadOnly, Rules: []permission.Rule{
		{Command: "ls -la", Decision: tools.Ask},
		{Command: "ls *", Decision: tools.Allow},
	}})
	cases := map[string]struct {
		want   tools.Decision
		source string
	}{
		"ls -l":    {tools.Allow, "rules[1]"},
		"ls -la":   {tools.Ask, "rules[0]"},
		"ls $X":    {tools.Ask, "rules[0]"},
		"ls -l[a]": {tools.Ask, "rules[0]"},
		"ls -l $X": {tools.Allow, "rules[1]"},
		"cat $X":   {tools.Deny, "mode=read-only"},
	}
	for command, c := range cases {
		if v := bash(root, t, command); v.Decision != c.want || v.Source != "tools.permission:"+c.source {
			t.Errorf("%q: got %+v, want %s by %s", command, v, c.want, c.source)
		}
	}
}

// TestAllowRulesDoNotWiden: what an allow rule matches is still exactly
// what it names; the rest of the line is judged on its own.
func TestAllowRulesDoNotWiden(t *testing.T) {
	root := policyOf(t, permission.Config{Rules: []permission.Rule{
		{Command: "git status", Decision: tools.Allow},
		{Command: "echo hi", Decision: tools.Allow},
		{Command: "ls *", Decision: tools.Allow},
	}})
	allowed := []string{"git status", "echo hi", "ls", "ls -la src", "ls *.go", "ls $DIR", "git status && echo hi", "{git,} status"}
	for _, command := range allowed {
		if v := bash(root, t, command); v.Decision != tools.Allow {
			t.Errorf("%q: got %+v, want allow", command, v)
		}
	}
	notAllowed := []string{
		"git status; rm x", "git status $(rm x)", "$(rm x)", "git status $X", "git $X", `git "$@"`,
		"echo $X", "echo h[i]", "echo {hi,there}", "git status{,x}", "g[i]t status", "$G status",
		"env git status", "sudo git status", "bash -c 'git status'", "eval git status", "git status | sh",
		"python3 -c 'import os; os.remove(\"f\")'",
	}
	for _, command := range notAllowed {
		if v := bash(root, t, command); v.Decision == tools.Allow {
			t.Errorf("%q: allowed %+v", command, v)
		}
	}
}

// TestInterpretersTheOperatorDidNotListAreAsked: python -c and the like
// run code the policy does not read; with no rule for them they are asked
// about (a rule can deny them by name), not denied.
func TestInterpretersTheOperatorDidNotListAreAsked(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.WorkspaceWrite, Rules: []permission.Rule{{Command: "rm *", Decision: tools.Deny}}})
	for _, command := range []string{`python3 -c 'import os; os.remove("f")'`, `perl -e 'unlink "f"'`, "sh script.sh", "source ./env.sh", "sh < setup.sh", "bash -x build.sh a b"} {
		if v := bash(root, t, command); v.Decision != tools.Ask {
			t.Errorf("%q: got %+v, want ask", command, v)
		}
	}
	named := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{{Command: "python3 *", Decision: tools.Deny}}})
	if v := bash(named, t, `/usr/bin/python3 -c 'import os'`); v.Decision != tools.Deny {
		t.Errorf("a rule naming the interpreter: %+v", v)
	}
}

// TestOrdinaryCommandsKeepTheirVerdicts: a deny rule for rm does not make
// everyday commands opaque.
func TestOrdinaryCommandsKeepTheirVerdicts(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{{Command: "rm *", Decision: tools.Deny}}})
	for _, command := range []string{
		"ls *.go", "go test ./...", "git commit -m \"$(date)\"", "for f in *.go; do gofmt -l \"$f\"; done",
		"echo {a,b}.txt", "cat <<'EOF'\n$(rm -rf ~)\nEOF\n", "command -v rm", "trap - EXIT", "trap INT",
		"find . -name '*.go'", "xargs -0 < list", "bash -c 'ls'", "sh -c 'echo $1' _ x", "echo rm -f f",
		"rmdir x", "sudo -l", "printf '%s\\n' rm", "ENV=production node app.js",
		`sudo cp "$SRC" /etc/x`, "timeout 60 go test $PKGS", "xargs -I{} cp {} dest/", "xargs -I {} cp {} dest/",
		`find "$DIR" -name '*.go' -exec grep -l foo {} +`, "nice -n 5 make $TARGET", "env CGO_ENABLED=0 go build $FLAGS",
	} {
		if v := bash(root, t, command); v.Decision != tools.Allow {
			t.Errorf("%q: got %+v, want allow", command, v)
		}
	}
}

// TestTheReasonSaysWhyItFailedClosed: the model and the operator read
// which rule held and why the command could not be read.
func TestTheReasonSaysWhyItFailedClosed(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{{Command: "rm *", Decision: tools.Deny, Reason: "use the edit tools"}}})
	v := bash(root, t, "X=rm; $X -f f")
	for _, want := range []string{`the command "$X -f f"`, "rules[0]", "use the edit tools", "named only at run time", "every rule that denies or asks"} {
		if !strings.Contains(v.Reason, want) {
			t.Errorf("reason %q does not say %q", v.Reason, want)
		}
	}
	v = bash(root, t, "echo rm | sh")
	if !strings.Contains(v.Reason, "standard input") {
		t.Errorf("reason %q does not name standard input", v.Reason)
	}
}
