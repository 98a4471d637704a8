package permission

import (
	"fmt"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
	"github.com/dsh-go/dsh/services/tools"
)

// nonRunners never run a program named by their arguments, so a word of
// theirs that names a denied program is data (echo rm, grep rm x, man rm).
// Every other program may be a wrapper the wrapper table does not know
// (setpriv rm f).
var nonRunners = []string{"echo", "printf", "grep", "egrep", "fgrep", "rg", "ag", "man", "info", "whatis",
	"apropos", "which", "whereis", "type", "help", "cat", "less", "more", "head", "tail", "wc", "ls", "file",
	"stat", ":", "true", "false", "test", "[", "hash", "command"} // command only as command -v/-V: else it is a wrapper

// restrictivePrograms returns the programs deny and ask rules for bash
// name as a plain word (rm of `rm *`, /bin/rm of `/bin/rm -rf /`).
func (p *policy) restrictivePrograms() []string {
	var out []string
	for i := range p.rules {
		r := &p.rules[i]
		if r.path != "" || r.command == nil || r.decision == tools.Allow || !r.matchesTool(BashTool) {
			continue
		}
		if prog := r.words[0]; !strings.ContainsAny(prog, `*?[\`) {
			out = append(out, prog)
		}
	}
	return out
}

// namesProgram reports whether the literal word v is the program prog:
// prog itself, or a path ending in /prog when prog has no slash.
func namesProgram(v, prog string) bool {
	return v == prog || !strings.Contains(prog, "/") && strings.HasSuffix(v, "/"+prog)
}

// namedTails judges, as the command it may run, every tail of c that
// starts with a word (not its first) naming the program of a deny or ask
// rule: a program the wrapper table does not know may run it (setpriv,
// valgrind, xvfb-run). Only what a rule denies or asks about counts, so
// allow rules stay as precise as they were.
func (p *policy) namedTails(c shell.Command, name string, l line) []part {
	if slices.Contains(nonRunners, name) {
		return nil
	}
	progs := p.restrictivePrograms()
	if len(progs) == 0 {
		return nil
	}
	sub := -1
	if name == "git" {
		sub = gitSubcommand(c.Words)
	}
	var out []part
	n := 0
	for i := 1; i < len(c.Words); i++ {
		w := c.Words[i]
		if i == sub {
			continue // git rm: a git subcommand, not the rm program
		}
		if !w.Exact() || !slices.ContainsFunc(progs, func(prog string) bool { return namesProgram(w.Value, prog) }) {
			continue
		}
		if n++; n > maxTails {
			why := fmt.Sprintf("it has more than %d words that name a program a rule denies or asks about", maxTails)
			pt := part{subject: fmt.Sprintf("the command %q", c.Text), program: c.Text}
			return append(out, p.opaque(pt, why, p.unreadable(pt, why)))
		}
		tail := shell.Command{Words: c.Words[i:], Text: joinWords(c.Words[i:]), Stdin: c.Stdin}
		for _, pt := range restrictive(p.judgeCommand(tail, l, true)) {
			pt.subject += fmt.Sprintf(" (which %q may run)", c.Text)
			out = append(out, pt)
		}
	}
	return out
}

// gitSubcommand returns the index of git's subcommand: its first word
// that is not an option or an option's value; -1 when there is none or
// it cannot be told.
func gitSubcommand(ws []shell.Word) int {
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		switch {
		case !w.Literal:
			return -1
		case slices.Contains([]string{"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--config-env", "--exec-path"}, w.Value):
			i++
		case strings.HasPrefix(w.Value, "-"):
		default:
			return i
		}
	}
	return -1
}
