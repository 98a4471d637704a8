package permission_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/plugins/tools/permission"
	"github.com/dsh-go/dsh/services/tools"
)

// huntRules allow git and echo and deny rm: a line made only of allowed
// programs must not reach rm.
var huntRules = permission.Config{Rules: []permission.Rule{
	{Command: "git *", Decision: tools.Allow},
	{Command: "echo *", Decision: tools.Allow},
	{Command: "rm *", Decision: tools.Deny},
}}

// reachesACommand are lines that run CMD although every program they name
// is allowed: bash expands a subscript's quoted text again (${a['$(cmd)']}),
// git runs what settings outside a fixed list name or load, and a changed
// PATH makes git any file. Each is first run for real with CMD a harmless
// touch, so the test knows bash and git do run it; then, with CMD an rm,
// the policy must not allow it.
var reachesACommand = []struct {
	name, line string
	real       bool // run for real (needs git for the git lines)
}{
	{"a quoted subscript in an expansion", `a=(1); echo ${a['$(CMD)']}`, true},
	{"a quoted subscript in a length", `a=(1); echo ${#a['$(CMD)']}`, true},
	{"an ANSI-C quoted subscript", `echo ${a[$'$(CMD)']}`, true},
	{"a quoted subscript in double quotes", `echo "${a['$(CMD)']}"`, true},
	{"a quoted subscript of a scalar", `x=1; echo ${x['$(CMD)']}`, true},
	{"the ext:: transport", `git -c protocol.ext.allow=always clone -q 'ext::sh -c CMD_EXT' out`, true},
	{"the ext:: transport from the environment", `GIT_ALLOW_PROTOCOL=ext git clone -q 'ext::sh -c CMD_EXT' out`, true},
	{"a pager for one command", `git -c pager.log='CMD' -c core.pager=cat log -1`, false},
	{"a remote's upload-pack", `git -c remote.origin.uploadpack='CMD' fetch`, false},
	{"pack-objects' hook", `git -c uploadpack.packObjectsHook='CMD' fetch`, false},
	{"a config file included", `git -c include.path=/tmp/cfg status`, false},
	{"a config file included on a condition", `git -c includeIf.gitdir:/.path=/tmp/cfg status`, false},
	{"a template's hooks", `git clone --template=/tmp/t https://example.com/r`, false},
	{"a template's hooks by setting", `git -c init.templateDir=/tmp/t init r`, false},
	{"a remote helper", `git -c remote.origin.vcs=x fetch`, false},
	{"an ssh proxy", `git -c core.gitProxy='CMD' fetch`, false},
	{"add -p's filter", `git -c interactive.diffFilter='CMD' add -p`, false},
	{"an unknown setting", `git -c lfs.customtransfer.x.path=/tmp/x fetch`, false},
	{"an ext:: remote stored", `git remote add x 'ext::sh -c CMD_EXT'`, false},
	{"a stored pager", `git config pager.log 'CMD'`, false},
	{"a stored include", `git config include.path /tmp/cfg`, false},
	{"a changed PATH", `PATH=.:$PATH git status`, false},
	{"an exported PATH", `export PATH=/tmp/x; git status`, false},
	// An identity's smtpServer is sendemail.smtpServer once chosen.
	{"an identity's smtp server", `git -c sendemail.x.smtpServer=/tmp/x -c sendemail.identity=x send-email --to=a@b p.patch`, false},
	{"an identity's smtp server stored", `git config sendemail.x.smtpServer /tmp/x`, false},
	// An alias without ! is git with the alias's words, options included.
	{"an alias to a git command that runs one", `git init -q && git -c alias.l="ls-remote --upload-pack='CMD; git-upload-pack' ." l`, true},
	{"an alias to difftool -x", `git -c alias.d="difftool -y -x 'CMD'" d`, false},
	{"an alias to clone --template", `git -c alias.c="clone --template=/tmp/t https://example.com/r" c`, false},
	{"an alias stored", `git config alias.l "ls-remote --upload-pack='CMD' ."`, false},
	// PATH set other than by an assignment: a loop, a builtin, arithmetic
	// (PATH=1 is the relative directory 1).
	{"PATH as a loop's variable", `for PATH in /tmp/x; do git status; done`, false},
	{"PATH in arithmetic", `((PATH=1)); git status`, false},
	{"PATH by let", `let PATH=1; git status`, false},
	{"PATH in a subscript", `echo ${a[PATH=1]}; git status`, false},
	{"PATH in a [[ -eq ]] operand", `[[ PATH=1 -eq 1 ]]; git status`, false},
	{"PATH in a value evaluated as arithmetic", `x=PATH=1; echo $((x)); git status`, false},
}

func TestLinesOfAllowedProgramsDoNotReachADeniedOne(t *testing.T) {
	root := policyOf(t, huntRules)
	for _, c := range reachesACommand {
		t.Run(c.name, func(t *testing.T) {
			if c.real {
				runsForReal(t, c.line)
			}
			line := strings.NewReplacer("CMD_EXT", "rm% x", "CMD", "rm x").Replace(c.line)
			if v := bash(root, t, line); v.Decision == tools.Allow {
				t.Fatalf("%q: allowed (%+v)", line, v)
			}
		})
	}
}

// runsForReal runs line with CMD a touch, in a fresh directory, with the
// real bash, and fails unless the touch happened.
func runsForReal(t *testing.T, line string) {
	t.Helper()
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	line = strings.NewReplacer("CMD_EXT", "touch% "+marker, "CMD", "touch "+marker).Replace(line)
	cmd := exec.Command("bash", "-c", line)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, _ := cmd.CombinedOutput()
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("bash -c %q did not run the command, so the case proves nothing: %s", line, out)
	}
}

// TestCommonGitSettingsAndSubscriptsKeepTheirVerdict: the lists above are
// not a reason to ask about settings that run nothing, subscripts without
// substitutions (a PATH set and not used is TestProgramTextsWithoutCommandsStayPrecise's).
func TestCommonGitSettingsAndSubscriptsKeepTheirVerdict(t *testing.T) {
	root := policyOf(t, huntRules)
	for _, line := range []string{
		`git -c user.name=x -c user.email=x@y commit -m z`,
		`git -c color.ui=always log`,
		`git -c pager.log=false log`,
		`git -c core.quotepath=off status`,
		`git -c safe.directory='*' status`,
		`git -c init.defaultBranch=main init`,
		`git config user.email x@y`,
		`git config --get remote.origin.url`,
		`git clone https://example.com/r`,
		`echo ${a[0]} ${a[i+1]} "${a[@]}"`,
		`git -c alias.st=status st`,
		`git config alias.lg "log --graph --oneline"`,
		`git -c sendemail.x.from=a@b status`,
		`echo $PATH; git status`,
		`[[ $PATH == *go* ]] && git status`,
	} {
		if v := bash(root, t, line); v.Decision != tools.Allow {
			t.Errorf("%q: got %+v, want allow", line, v)
		}
	}
}
