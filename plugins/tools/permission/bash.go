package permission

import (
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/internal/lazyregexp"
	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
	"github.com/dsh-go/dsh/services/tools"
)

// maxDepth bounds how deep `bash -c 'bash -c ...'` is read; code nested
// deeper is opaque.
const maxDepth = 4

// isDescriptor reports whether t is /dev/fd/N, which bash reads as a
// descriptor. Anything longer is a path through /proc/self/fd:
// /dev/fd/../../../etc/hosts writes /etc/hosts.
func isDescriptor(t string) bool {
	n, ok := strings.CutPrefix(t, "/dev/fd/")
	return ok && n != "" && strings.Trim(n, "0123456789") == ""
}

// harmless are write targets that are not files.
var harmless = []string{"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"}

// line is what judging one command needs from around it.
type line struct {
	text      string // the call's whole command line: where a script file may have been written
	workspace string
	depth     int // how many inline scripts deep
}

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
	return p.judgeLine(*args.Command, line{text: *args.Command, workspace: c.Workspace})
}

func (p *policy) judgeLine(src string, l line) []part {
	script, err := shell.Parse(src)
	if err != nil {
		return []part{p.unparsed(src, err)}
	}
	return p.judgeScript(script, l)
}

// unparsed decides a line that could not be parsed: it may be any
// command, so every rule that denies or asks holds; the rest is denied
// with the parser's message, except in full-access mode.
func (p *policy) unparsed(src string, err error) part {
	// Its program is unknown: a session answer covers this line only.
	pt := part{subject: fmt.Sprintf("the command %q", src), program: src}
	fallback := p.decide(pt, tools.Deny, "parse", fmt.Sprintf("it could not be read as bash (%v); fix its quoting or split it into simpler commands", err))
	if p.mode == FullAccess {
		fallback = p.byMode(pt, BashTool)
	}
	return p.opaque(pt, "it could not be read as bash", fallback)
}

func (p *policy) judgeScript(script shell.Script, l line) []part {
	var parts []part
	for _, cmd := range script.Commands {
		parts = append(parts, p.judgeCommand(cmd, l, false)...)
	}
	if setsPathThenRuns(script, l.text) {
		pt := part{subject: "the assignment of PATH", program: l.text}
		why := "PATH changes where a command's name is looked up: git or echo may then be a program the line (or an earlier one) wrote"
		parts = append(parts, p.opaque(pt, why, p.unreadable(pt, why)))
	}
	if name, ok := setsShellCode(script); ok {
		pt := part{subject: fmt.Sprintf("the assignment of %s", name), program: l.text}
		why := fmt.Sprintf("%s makes a shell started later run code the line does not show", name)
		parts = append(parts, p.opaque(pt, why, p.unreadable(pt, why)))
	}
	if len(script.Names) > 0 {
		pt := part{subject: fmt.Sprintf("the name %q", script.Names[0]), program: l.text}
		why := fmt.Sprintf("bash evaluates %s as a variable name, and a value known only at run time such as a[$(cmd)] runs cmd, as eval would", script.Names[0])
		parts = append(parts, p.opaque(pt, why, p.unreadable(pt, why)))
	}
	if script.Prompts > 0 {
		pt := part{subject: "the prompt expansion ${…@P}", program: l.text}
		why := "${…@P} expands a variable as a prompt string, which runs the command substitutions it holds, as eval would"
		parts = append(parts, p.opaque(pt, why, p.unreadable(pt, why)))
	}
	parts = append(parts, p.judgeCommandVars(script, l)...)
	for _, w := range script.Writes {
		if pt, ok := p.judgeWrite(w, l.workspace); ok {
			parts = append(parts, pt)
		}
	}
	// A subscript bash evaluates runs what it holds, like eval: its
	// commands are judged, and it is opaque when it cannot be read.
	for _, code := range script.Subscripts {
		parts = append(parts, p.judgeNested(": "+code, l, false)...)
	}
	// A string holding $(...) runs its substitutions when bash evaluates
	// a variable holding it as arithmetic (x='a[$(cmd)]'; (( x ))); the
	// rules that deny or ask meet what they would run. Read as the
	// argument of : so that only the substitutions count.
	for _, code := range script.Code {
		if l.depth < maxDepth {
			parts = append(parts, restrictive(p.judgeNested(": "+code, l, true))...)
		}
	}
	return parts
}

// judgeNested judges code a command runs: an inline script, an eval'd
// string, a trap. Code too deep to read, or that does not parse when
// lenient is false, is opaque.
func (p *policy) judgeNested(code string, l line, lenient bool) []part {
	pt := part{subject: fmt.Sprintf("the code %q", code), program: l.text}
	if l.depth >= maxDepth {
		return []part{p.opaque(pt, fmt.Sprintf("it is nested more than %d levels deep", maxDepth), p.unreadable(pt, "it is nested too deep"))}
	}
	l.depth++
	script, err := shell.Parse(code)
	switch {
	case err != nil && lenient:
		return nil
	case err != nil:
		return []part{p.unparsed(code, err)}
	}
	return p.judgeScript(script, l)
}

// restrictive keeps the parts a rule denies or asks about, and opaque
// code: what a guess at what runs may add. A guess never allows, and the
// mode's verdict on a guess would be noise.
func restrictive(parts []part) []part {
	out := parts[:0]
	for _, pt := range parts {
		if pt.rule && pt.v.Decision != tools.Allow {
			out = append(out, pt)
		}
	}
	return out
}

// judgeCommand judges one simple command and what it runs. inTail says c
// is a guess at what a wrapper runs, whose own tails are already guessed.
func (p *policy) judgeCommand(c shell.Command, l line, inTail bool) []part {
	return p.judgeCommandIn(c, l, inTail, false)
}

// judgeCommandIn is judgeCommand for a tail of a wrapper (guessed) whose
// own words were guessed at already: the tail's are a suffix of them.
func (p *policy) judgeCommandIn(c shell.Command, l line, inTail, guessed bool) []part {
	prog := c.Program()
	pt := part{subject: fmt.Sprintf("the command %q", c.Text), program: prog.Value}
	// A command judged unreadable names itself, not its program, for
	// "allow for this session": allowing `timeout 5 make` or `$CMD` must
	// not allow whatever timeout or $CMD runs next time. A word that
	// expands takes its value from the line (CMD=ls; $CMD): the line then.
	whole := pt
	whole.program = c.Text
	if !exact(c.Words) {
		whole.program = l.text
	}
	if !prog.Literal {
		why := "its program is named only at run time"
		return []part{p.opaque(whole, why, p.unreadable(whole, why))}
	}
	if prog.Glob && globMayRunCode(prog) {
		why := fmt.Sprintf("its program %q is a glob that may name a shell or a program that runs others", prog.Value)
		return []part{p.opaque(whole, why, p.unreadable(whole, why))}
	}
	name := path.Base(prog.Value)
	e := effectOf(c, name, l, guessed)
	var out []part
	fb := fallback{}
	if e.runs {
		fb = fallback{whole: &whole, runner: name}
	}
	out = append(out, p.byRules(pt, c, fb))
	if e.opaque != "" {
		out = append(out, p.opaque(whole, e.opaque, p.unreadable(whole, e.opaque)))
	}
	for _, code := range e.code {
		out = append(out, p.judgeNested(code, l, false)...)
	}
	for _, code := range e.guesses {
		if l.depth < maxDepth {
			out = append(out, restrictive(p.judgeNested(code, l, true))...)
		}
	}
	if e.wrapper {
		out = append(out, p.wrapped(c, e, l, inTail)...)
	} else if !inTail {
		out = append(out, p.namedTails(c, name, l)...)
	}
	return out
}

// wrapped judges what a wrapper may run: every tail of its words that
// starts with a literal word other than an option or an assignment (sudo
// -u bob rm -rf / has `bob rm -rf /` and `rm -rf /`), and every tail that
// starts with a word known only at run time where the wrapper's syntax
// puts its command. Only what a rule denies or asks about counts: a tail
// may be a wrong guess, and a guess never allows.
//
// A wrapper that is itself a tail (sudo env "$X", xargs nice, find -exec
// env {}) is judged by its own syntax too (inner): its command may start
// at a word known only at run time that the outer wrapper took for an
// argument, or at an item xargs appends. Its tails that start with a
// literal word are the outer wrapper's own, tried there; so an inner
// wrapper tries only the others, which are opaque at once, and nesting
// costs no recursion. For those literal tails to carry what an xargs or
// find among them fills in, the outer wrapper's words from such a tail on
// are taken as that tail substitutes them.
func (p *policy) wrapped(c shell.Command, e effect, l line, inner bool) []part {
	ws := e.args
	var starts []bool // nil: a word known only at run time may start the command anywhere
	if name := path.Base(c.Program().Value); name == "find" {
		starts = findCommands(ws[:e.starts])
	} else if sx, ok := wrapperSyntax[name]; ok {
		starts = commandStarts(ws[:e.starts], sx)
	}
	var out []part
	n := 0
	for i := 1; i < e.starts; i++ {
		w := ws[i]
		if w.Literal && (strings.HasPrefix(w.Value, "-") || strings.Contains(w.Value, "=")) {
			continue
		}
		if !w.Literal && starts != nil && !starts[i] {
			continue // an argument of the command, or an option's value
		}
		if inner && w.Literal {
			continue // the outer wrapper tries this tail
		}
		if n++; n > maxTails {
			why := fmt.Sprintf("it has more than %d words that may be the command it runs", maxTails)
			pt := part{subject: fmt.Sprintf("the command %q", c.Text), program: c.Text}
			return append(out, p.opaque(pt, why, p.unreadable(pt, why)))
		}
		tail := shell.Command{Words: ws[i:], Text: joinWords(ws[i:]), Stdin: c.Stdin}
		if name := path.Base(w.Value); w.Literal && (name == "xargs" || name == "find" && isFindExec(tail)) {
			// substituted returns the words themselves when it changes
			// none: nested xargs then cost no copy each.
			if sub := substituted(ws[i:], name); len(sub) != len(ws)-i || &sub[0] != &ws[i] {
				ws = append(ws[:i:i], sub...)
				tail.Words = ws[i:]
			}
		}
		for _, pt := range restrictive(p.judgeCommandIn(tail, l, true, true)) {
			pt.subject += fmt.Sprintf(" (run by %q)", c.Text)
			out = append(out, pt)
		}
	}
	return out
}

// joinWords renders a wrapper's tail for messages, cut after about 200
// bytes: a long tail is rendered once per tail tried.
func joinWords(ws []shell.Word) string {
	var b strings.Builder
	for i, w := range ws {
		if b.Len() > 200 {
			b.WriteString(" …")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w.Value)
	}
	return b.String()
}

// judgeWrite holds a redirection to the mode: read-only writes nothing,
// workspace-write asks before writing outside the workspace (or to a file
// named only at run time). Other modes and no mode leave it be.
func (p *policy) judgeWrite(w shell.Write, workspace string) (part, bool) {
	if w.Literal && (slices.Contains(harmless, w.Target) || isDescriptor(w.Target)) {
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

// setsShellCode returns a variable the script sets that makes bash run
// code it does not show: BASH_ENV names a file a non-interactive bash
// sources first, BASH_FUNC_name%% is a function bash imports. (ENV counts
// only for interactive shells, and is a common name for other things.) It is set before
// a command, alone, by export or declare, or as a NAME=value word (env).
func setsShellCode(s shell.Script) (string, bool) {
	for _, n := range s.Assigned {
		if shellCodeVar(n) {
			return n, true
		}
	}
	for _, c := range s.Commands {
		for _, w := range c.Words[1:] {
			if n, _, ok := strings.Cut(w.Value, "="); ok && shellCodeVar(n) {
				return n, true
			}
		}
	}
	return "", false
}

func shellCodeVar(name string) bool {
	return name == "BASH_ENV" || strings.HasPrefix(name, "BASH_FUNC_")
}

// setsPathThenRuns reports whether the script sets PATH and runs a
// command besides the declarations that set it: each call's shell is new,
// so a PATH set and not used changes nothing. PATH is set by an
// assignment, by a builtin or loop that stores into it (read, printf -v,
// for, ${PATH:=…}, a nameref), and by arithmetic: ((PATH=1)), let,
// $[…], a subscript or a [[ -eq ]] operand make PATH the relative
// directory 1, where a file the model wrote may be named git.
func setsPathThenRuns(s shell.Script, text string) bool {
	// Every regular expression below matches PATH literally: a line
	// without it is spared them (a nested line is judged once a level).
	literal := strings.Contains(text, "PATH")
	set := slices.Contains(s.Assigned, "PATH") || (literal && arithPath.Regexp().MatchString(text)) ||
		varSetOtherwise(s, text, func(n string) bool { return n == "PATH" }) != ""
	for _, c := range s.Commands {
		for _, w := range c.Words[1:] {
			set = set || strings.HasPrefix(w.Value, "PATH=")
		}
	}
	if !set {
		return false
	}
	for _, c := range s.Commands {
		switch c.Words[0].Value {
		case "export", "declare", "typeset", "local", "readonly":
		default:
			return true
		}
	}
	return false
}

// commandVars name variables whose value a program the line may start
// runs as a command line (git's editor, pager and ssh through sh -c; man,
// less, sudo): GIT_EDITOR='rm f' git commit runs rm as surely as
// git -c core.editor='rm f' commit does.
var commandVars = []string{"GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_PAGER", "GIT_SSH", "GIT_SSH_COMMAND",
	"GIT_EXTERNAL_DIFF", "GIT_ASKPASS", "GIT_PROXY_COMMAND", "EDITOR", "VISUAL", "PAGER", "MANPAGER",
	"SYSTEMD_PAGER", "SSH_ASKPASS", "SUDO_ASKPASS", "LESSOPEN", "LESSCLOSE", "PROMPT_COMMAND",
	// sudoedit's and sudo -e's editor, systemctl edit's, kubectl edit's,
	// gh's; rsync's remote shell (run here) and connect program; fc's
	// editor; bash -x expands PS4 (a $(cmd) in it runs) before each
	// command it traces.
	"SUDO_EDITOR", "SYSTEMD_EDITOR", "KUBE_EDITOR", "GH_EDITOR", "GH_PAGER", "GH_BROWSER", "BROWSER",
	"RSYNC_RSH", "RSYNC_CONNECT_PROG", "FCEDIT", "PS4"}

// gitConfigVar reports whether name gives git settings the line does not
// show (GIT_CONFIG_KEY_0=core.pager GIT_CONFIG_VALUE_0='rm f'), or the
// directory git runs its own commands from: the environment's forms of
// git -c and --config-env.
func gitConfigVar(name string) bool {
	switch name {
	case "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_EXEC_PATH",
		"GIT_TEMPLATE_DIR", "GIT_ALLOW_PROTOCOL":
		return true
	}
	return strings.HasPrefix(name, "GIT_CONFIG_KEY_") || strings.HasPrefix(name, "GIT_CONFIG_VALUE_")
}

// judgeCommandVars judges the values of the command variables the line
// sets — before a command, alone, through export or declare, or as a
// NAME=value word (env) — as the code they are; a value known only at run
// time, and git settings from the environment, are opaque.
func (p *policy) judgeCommandVars(script shell.Script, l line) []part {
	var out []part
	if n := commandVarSetOtherwise(script, l.text); n != "" {
		pt := part{subject: fmt.Sprintf("the setting of %s", n), program: l.text}
		why := fmt.Sprintf("%s is a command a program runs, and the line sets it from a value the policy does not read (read, printf -v, mapfile, a for loop, ${%s:=…}, a nameref)", n, n)
		out = append(out, p.opaque(pt, why, p.unreadable(pt, why)))
	}
	vals := script.Values
	for _, c := range script.Commands {
		for _, w := range c.Words[1:] {
			if n, v, ok := strings.Cut(w.Value, "="); ok && w.Literal && (slices.Contains(commandVars, n) || gitConfigVar(n)) {
				vals = append(vals, shell.Assignment{Name: n, Value: shell.Word{Value: v, Literal: true}})
			}
		}
	}
	for _, a := range vals {
		v := a.Value
		switch {
		case gitConfigVar(a.Name):
			if v.Literal && v.Value == "/dev/null" {
				continue
			}
			pt := part{subject: fmt.Sprintf("the assignment of %s", a.Name), program: l.text}
			why := fmt.Sprintf("%s gives git settings, which may name commands, that the line does not show", a.Name)
			out = append(out, p.opaque(pt, why, p.unreadable(pt, why)))
		case !slices.Contains(commandVars, a.Name):
		case !v.Literal:
			pt := part{subject: fmt.Sprintf("the assignment of %s", a.Name), program: l.text}
			why := fmt.Sprintf("%s is a command a program runs, and its value is known only at run time", a.Name)
			out = append(out, p.opaque(pt, why, p.unreadable(pt, why)))
		case a.Name == "PS4":
			// A prompt string: expanded as a double-quoted word is, so
			// only the substitutions in it run.
			out = append(out, p.judgeNested(`: "`+strings.ReplaceAll(v.Value, `"`, `\"`)+`"`, l, false)...)
		case strings.TrimSpace(v.Value) != "":
			// less reads LESSOPEN='|cmd %s' and '||cmd %s' as a pipe.
			out = append(out, p.judgeNested(strings.TrimLeft(v.Value, "|-"), l, false)...)
		}
	}
	return out
}

// isCommandVar reports whether name is a command variable or gives git
// settings.
func isCommandVar(name string) bool { return slices.Contains(commandVars, name) || gitConfigVar(name) }

// varSetters are the builtins that set the variables their operands name
// to values of their own: read -r EDITOR <<< 'rm f', printf -v EDITOR,
// mapfile, getopts.
var varSetters = []string{"read", "printf", "mapfile", "readarray", "getopts"}

// commandVarSetOtherwise names a command variable the line sets other
// than by an assignment (which judgeCommandVars reads): as an operand of
// a builtin that stores into it, through a nameref (declare -n r=EDITOR),
// as a for or select loop's variable, or by ${NAME:=value}. "" when none.
func commandVarSetOtherwise(script shell.Script, text string) string {
	return varSetOtherwise(script, text, isCommandVar)
}

// varSetOtherwise is commandVarSetOtherwise for the variables want names.
func varSetOtherwise(script shell.Script, text string, want func(string) bool) string {
	for _, c := range script.Commands {
		if len(c.Words) == 0 {
			continue
		}
		name := path.Base(c.Words[0].Value)
		nameref := (name == "declare" || name == "typeset" || name == "local") &&
			slices.ContainsFunc(c.Words[1:], func(w shell.Word) bool {
				return strings.HasPrefix(w.Value, "-") && strings.Contains(w.Value, "n")
			})
		if !nameref && !slices.Contains(varSetters, name) {
			continue
		}
		for _, w := range c.Words[1:] {
			v := w.Value
			if nameref {
				_, v, _ = strings.Cut(v, "=")
			}
			if want(v) {
				return v
			}
		}
	}
	// loopOrDefault needs a loop's keyword or "${" in the text; most
	// lines have neither and are spared the expression.
	if !strings.Contains(text, "for") && !strings.Contains(text, "select") && !strings.Contains(text, "${") {
		return ""
	}
	for _, m := range loopOrDefault.Regexp().FindAllStringSubmatch(text, -1) {
		for _, n := range m[1:] {
			if n != "" && want(n) {
				return n
			}
		}
	}
	return ""
}

// arithPath finds PATH assigned in arithmetic (PATH=1, PATH+=1, PATH++),
// parsed or in a string bash evaluates as arithmetic later (let 'PATH=1',
// [[ PATH=1 -eq 1 ]], x='PATH=1'; ((x))): not a comparison (==).
var arithPath = lazyregexp.New(`\bPATH\s*(?:[-+*/%&|^]|<<|>>)?=(?:[^=]|$)|(?:\+\+|--)\s*PATH\b|\bPATH\s*(?:\+\+|--)`)

// loopOrDefault finds a variable a for or select loop sets, or one that
// ${NAME=value} or ${NAME:=value} sets.
var loopOrDefault = lazyregexp.New(`\b(?:for|select)\s+([A-Za-z_][A-Za-z0-9_]*)\b|\$\{([A-Za-z_][A-Za-z0-9_]*):?=`)
