package permission

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
	"github.com/dsh-go/dsh/services/tools"
)

// maxDepth bounds how deep `bash -c 'bash -c ...'` is read.
const maxDepth = 4

// shells run their -c argument as a script.
var shells = []string{"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish"}

// wrappers run their arguments as another command (sudo rm, xargs rm,
// timeout 5 rm), or run code no argument shows (source, a shell with a
// script file).
var wrappers = []string{"eval", "exec", "command", "builtin", "source", ".", "env", "sudo", "doas", "su",
	"nohup", "nice", "ionice", "time", "timeout", "xargs", "setsid", "stdbuf", "chroot", "unshare",
	"nsenter", "watch", "flock", "parallel", "busybox", "script"}

// harmless are write targets that are not files.
var harmless = []string{"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}

// judgeBash judges each simple command of the call's command line and each
// file it writes through a redirection.
func (p *policy) judgeBash(c tools.Call) []part {
	var args struct {
		Command *string `json:"command"`
	}
	if json.Unmarshal(c.Arguments, &args) != nil || args.Command == nil {
		// The schema check before approval should have refused it; with
		// nothing to read, only the rules for every command apply.
		return []part{p.unreadable(part{subject: "a bash call without a command string"}, "its command argument is missing")}
	}
	return p.judgeLine(*args.Command, c.Workspace, 0)
}

func (p *policy) judgeLine(line, workspace string, depth int) []part {
	script, err := shell.Parse(line)
	if err != nil {
		// Its program is unknown: a session answer covers this line only.
		pt := part{subject: fmt.Sprintf("the command %q", line), program: line}
		if r := p.anyCommandRule(); r != nil {
			return []part{p.byRule(pt, r)}
		}
		if p.mode == FullAccess {
			return []part{p.byMode(pt, BashTool)}
		}
		return []part{p.decide(pt, tools.Deny, "parse", fmt.Sprintf("it could not be read as bash (%v); fix its quoting or split it into simpler commands", err))}
	}
	var parts []part
	for _, cmd := range script.Commands {
		parts = append(parts, p.judgeCommand(cmd, line, workspace, depth)...)
	}
	for _, w := range script.Writes {
		if pt, ok := p.judgeWrite(w, workspace); ok {
			parts = append(parts, pt)
		}
	}
	return parts
}

// anyCommandRule is the first bash rule that takes any command, even one
// that cannot be read before it runs.
func (p *policy) anyCommandRule() *rule {
	for i := range p.rules {
		r := &p.rules[i]
		if r.path == "" && r.matchesTool(BashTool) && r.matchesAnyCommand() {
			return r
		}
	}
	return nil
}

func (p *policy) firstRule(c shell.Command) *rule {
	for i := range p.rules {
		r := &p.rules[i]
		if r.path == "" && r.matchesTool(BashTool) && r.matchesCommand(c) {
			return r
		}
	}
	return nil
}

// restrictingRule is the first bash rule that denies, else the first that
// asks, among those c matches; nil when none does.
func (p *policy) restrictingRule(c shell.Command) *rule {
	var best *rule
	for i := range p.rules {
		r := &p.rules[i]
		if r.decision != tools.Allow && r.path == "" && r.matchesTool(BashTool) && r.matchesCommand(c) &&
			(best == nil || rank(r.decision) > rank(best.decision)) {
			best = r
		}
	}
	return best
}

func verbOf(d tools.Decision) string {
	if d == tools.Deny {
		return "denies"
	}
	return "asks about"
}

// unreadable decides a command whose meaning is not known before it runs:
// by a rule that takes every command, else allowed in full-access mode,
// denied in read-only mode and asked about otherwise.
func (p *policy) unreadable(pt part, why string) part {
	if r := p.anyCommandRule(); r != nil {
		return p.byRule(pt, r)
	}
	switch p.mode {
	case FullAccess, ReadOnly:
		return p.byMode(pt, BashTool)
	}
	return p.decide(pt, tools.Ask, "unreadable", why+", so it cannot be judged before it runs")
}

func (p *policy) judgeCommand(c shell.Command, line, workspace string, depth int) []part {
	prog := c.Program()
	pt := part{subject: fmt.Sprintf("the command %q", c.Text), program: prog.Value}
	// A command judged unreadable names itself, not its program, for
	// "allow for this session": allowing `timeout 5 make` or `$CMD` must
	// not allow whatever timeout or $CMD runs next time. A word that
	// expands takes its value from the line (CMD=ls; $CMD): the line then.
	whole := pt
	whole.program = c.Text
	if slices.ContainsFunc(c.Words, func(w shell.Word) bool { return !w.Literal }) {
		whole.program = line
	}
	if !prog.Literal {
		// It could be the program a rule denies or asks about: then a
		// person sees it first, whatever the mode would allow (full-access
		// allowed `$X -rf ~` beside a deny rule for rm).
		if r := p.restrictingRule(c); r != nil && p.mode != ReadOnly {
			return []part{p.decide(whole, tools.Ask, "unreadable", fmt.Sprintf(
				"its program name is not literal and may be one that %s:%s %s, so it cannot be judged before it runs", p.source, r.where, verbOf(r.decision)))}
		}
		return []part{p.unreadable(whole, "its program name is not literal")}
	}
	name := path.Base(prog.Value)
	r := p.firstRule(c)
	var out []part
	switch {
	case r != nil:
		out = append(out, p.byRule(pt, r))
	case slices.Contains(shells, name) || slices.Contains(wrappers, name) || isFindExec(c):
		out = append(out, p.unreadable(whole, fmt.Sprintf("%s runs other commands", name)))
	default:
		out = append(out, p.byMode(pt, BashTool))
	}
	if script, ok := inlineScript(c, name); ok && depth < maxDepth {
		return append(out, p.judgeLine(script, workspace, depth+1)...)
	}
	if slices.Contains(wrappers, name) || isFindExec(c) {
		out = append(out, p.wrapped(c)...)
	}
	return out
}

// inlineScript returns the script a `sh -c '...'` or `eval ...` runs, or
// an alias stands for, when it is literal.
func inlineScript(c shell.Command, name string) (string, bool) {
	ws := c.Words[1:]
	if name == "alias" {
		// alias x='rm -rf' makes x run rm -rf on the lines after it:
		// the alias's text is judged as the commands it becomes.
		var b []string
		for _, w := range ws {
			if _, v, ok := strings.Cut(w.Value, "="); ok && w.Literal {
				b = append(b, v)
			}
		}
		return strings.Join(b, "\n"), len(b) > 0
	}
	if name == "eval" {
		var b []string
		for _, w := range ws {
			if !w.Literal {
				return "", false
			}
			b = append(b, w.Value)
		}
		return strings.Join(b, " "), len(b) > 0
	}
	if !slices.Contains(shells, name) {
		return "", false
	}
	for i, w := range ws {
		if !w.Literal || !strings.HasPrefix(w.Value, "-") || strings.HasPrefix(w.Value, "--") {
			return "", false
		}
		if strings.Contains(w.Value, "c") && i+1 < len(ws) && ws[i+1].Literal {
			return ws[i+1].Value, true
		}
	}
	return "", false
}

func isFindExec(c shell.Command) bool {
	if path.Base(c.Program().Value) != "find" {
		return false
	}
	return slices.ContainsFunc(c.Words[1:], func(w shell.Word) bool {
		return !w.Literal || slices.Contains([]string{"-exec", "-execdir", "-ok", "-okdir"}, w.Value)
	})
}

// wrapped judges the commands a wrapper may run: every tail of its words
// that starts with a literal word other than an option or an assignment
// is a candidate (sudo -u bob rm -rf / has candidates `bob rm -rf /` and
// `rm -rf /`). Only the rules that deny or ask count: a candidate may be
// a wrong guess, and a guess must never allow.
func (p *policy) wrapped(c shell.Command) []part {
	var out []part
	for i := 1; i < len(c.Words); i++ {
		w := c.Words[i]
		if !w.Literal || strings.HasPrefix(w.Value, "-") || strings.Contains(w.Value, "=") {
			continue
		}
		cand := shell.Command{Words: c.Words[i:], Text: joinWords(c.Words[i:])}
		if r := p.firstRule(cand); r != nil && r.decision != tools.Allow {
			pt := part{subject: fmt.Sprintf("the command %q (run by %q)", cand.Text, c.Text), program: w.Value}
			out = append(out, p.byRule(pt, r))
		}
	}
	return out
}

func joinWords(ws []shell.Word) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.Value
	}
	return strings.Join(s, " ")
}

// judgeWrite holds a redirection to the mode: read-only writes nothing,
// workspace-write asks before writing outside the workspace (or to a file
// named only at run time). Other modes and no mode leave it be.
func (p *policy) judgeWrite(w shell.Write, workspace string) (part, bool) {
	if w.Literal && (slices.Contains(harmless, w.Target) || strings.HasPrefix(w.Target, "/dev/fd/")) {
		return part{}, false
	}
	// A redirection that asks names itself for "allow for this session";
	// no name at all would cover every bash command.
	pt := part{subject: fmt.Sprintf("the redirection %q", w.Text), program: w.Text}
	switch p.mode {
	case ReadOnly:
		return p.decide(pt, tools.Deny, "mode="+string(p.mode), "read-only mode writes no file"), true
	case WorkspaceWrite:
		switch {
		case !w.Literal:
			return p.decide(pt, tools.Ask, "mode="+string(p.mode), "the file it writes is named only at run time"), true
		case strings.HasPrefix(w.Target, "~") || !inside(w.Target, workspace):
			return p.decide(pt, tools.Ask, "mode="+string(p.mode), "it writes outside the workspace"), true
		}
	}
	return part{}, false
}
