package permission

import (
	"path"
	"slices"
	"strings"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
)

// maxTails bounds the words of a wrapper tried as the command it runs;
// past it the wrapper is opaque.
const maxTails = 64

// shells run a -c argument, a script file or their standard input as code.
var shells = []string{"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "rbash", "yash", "posh", "csh", "tcsh"}

// wrappers run some of their words as another command (sudo rm, xargs rm,
// timeout 5 rm, find -exec rm).
var wrappers = []string{"exec", "command", "builtin", "env", "sudo", "doas", "su", "runuser", "pkexec",
	"nohup", "nice", "ionice", "chrt", "taskset", "time", "timeout", "xargs", "setsid", "stdbuf", "unbuffer",
	"chroot", "unshare", "nsenter", "watch", "flock", "busybox", "script", "strace", "ltrace", "fakeroot",
	"systemd-run", "firejail", "ssh", "find",
	"setpriv", "prlimit", "numactl", "cgexec", "xvfb-run", "torsocks", "proxychains", "proxychains4", "bwrap",
	"chpst", "valgrind", "perf", "eatmydata", "faketime", "dbus-run-session", "catchsegv", "softlimit",
	"daemonize", "run-one", "sem", "nocache", "gdb"}

// codeRunners run a string, a file or their input as shell code, or make
// a name run another program.
var codeRunners = []string{"eval", "trap", "source", ".", "alias", "hash", "enable", "mapfile", "readarray", "parallel",
	"sg", "awk", "gawk", "mawk", "nawk", "sed", "gsed", "expect", "git"}

// effect is what a command runs besides its own program, read from its
// program's name and its words.
type effect struct {
	runs    bool         // it runs other code: with no rule for it, it cannot be judged before it runs
	wrapper bool         // it runs a command made of some of its words: try the tails of args
	args    []shell.Word // the words tails are taken from
	starts  int          // tails start before this index of args (xargs's appended items start none)
	code    []string     // literal code it runs: an inline script, an eval'd string, a trap
	guesses []string     // words that may be code to a wrapper (su -c '...', watch '...')
	opaque  string       // why it runs code known only at run time; "" when it does not
}

// effectOf reads what c, whose program's base name is name, runs.
func effectOf(c shell.Command, name string, l line, guessed bool) effect {
	e := effectByName(c, name, l, guessed)
	if why := programTextRuns(c.Words, name); why != "" {
		e.runs, e.opaque = true, why
	}
	return e
}

func effectByName(c shell.Command, name string, l line, guessed bool) effect {
	ws := c.Words
	switch {
	case slices.Contains(shells, name):
		return shellEffect(c, l)
	case name == "eval":
		return evalEffect(ws)
	case name == "trap":
		return trapEffect(ws)
	case name == "source" || name == ".":
		e := effect{runs: true}
		if f, ok := operand(ws[1:]); ok && !f.Literal {
			e.opaque = "it runs a file named only at run time (a process substitution or a variable)"
		} else if ok {
			scriptFile(&e, f.Value, l)
		}
		return e
	case name == "alias":
		// alias x='rm -rf' makes x run rm -rf on the lines after it: the
		// alias's text is judged as the commands it becomes.
		var e effect
		for _, w := range ws[1:] {
			if _, v, ok := strings.Cut(w.Value, "="); ok && w.Literal {
				e.code = append(e.code, v)
			}
		}
		return e
	case name == "hash" && leadingFlag(ws, 'p', ""), name == "enable" && leadingFlag(ws, 'f', ""):
		return effect{runs: true, opaque: "it makes a name run a program chosen at run time"}
	case name == "mapfile" || name == "readarray":
		if leadingFlag(ws, 'C', "dnOsuCc") {
			return effect{runs: true, opaque: "its callback runs with input known only at run time"}
		}
		return effect{}
	case name == "sg":
		return sgEffect(ws)
	case name == "git":
		return gitEffect(ws)
	case name == "tar" || name == "gtar" || name == "bsdtar":
		return optionCode(ws, "IF", tarCode, tarOldStyle(ws))
	case name == "rsync":
		return optionCode(ws, "e", rsyncCode, false)
	case name == "zip":
		// zip -T's test command: -TT cmd, read as its long form.
		ws = slices.Clone(ws)
		for i, w := range ws {
			if w.Literal && (w.Value == "-TT" || strings.HasPrefix(w.Value, "-TT=")) {
				ws[i].Value = "--unzip-command" + strings.TrimPrefix(w.Value, "-TT")
			}
		}
		return optionCode(ws, "", []string{"--unzip-command"}, false)
	case name == "parallel":
		return effect{runs: true, opaque: "it runs commands built from its input"}
	case name == "find" && !isFindExec(c):
		return effect{}
	case name == "command" && (leadingFlag(ws, 'v', "") || leadingFlag(ws, 'V', "")):
		return effect{} // it only says what a name is
	case slices.Contains(wrappers, name):
		return wrapperEffect(c, name, guessed)
	}
	return effect{}
}

// wrapperEffect reads the wrapper c; guessed says its words were guessed
// at as code already (it is a tail of another wrapper's).
func wrapperEffect(c shell.Command, name string, guessed bool) effect {
	e := effect{runs: true, wrapper: true, args: c.Words, starts: len(c.Words)}
	switch name {
	case "sudo", "doas":
		const withArg = "ugpChrtUDRTa"
		if leadingFlag(c.Words, 's', withArg) || leadingFlag(c.Words, 'i', withArg) || hasLong(c.Words, "--shell", "--login") {
			e.opaque = "it starts a shell, which reads commands from its standard input"
		}
	case "su", "runuser":
		if !hasFlag(c.Words, 'c') && !hasLong(c.Words, "--command", "--session-command") {
			e.opaque = "it starts a shell, which reads commands from its standard input"
		}
	case "xargs", "find":
		e.args = substituted(c.Words, name)
	}
	if codeUnknown(c.Words, wrapperSyntax[name]) {
		e.opaque = "it runs an option's value known only at run time as a command line"
	}
	for _, w := range e.args[1:] {
		if guessed {
			break
		}
		if !w.Literal {
			continue
		}
		if looksLikeCode(w.Value) {
			e.guesses = append(e.guesses, w.Value)
			// An option's value may be attached to its letter, after
			// other letters: env -vS'rm f', script -qc'rm f'.
			vals, ok := attachedValues(w.Value)
			if !ok {
				e.opaque = "it has an option cluster too long to tell which letter takes a command line"
			}
			e.guesses = append(e.guesses, vals...)
		}
		// An option's value may be a command line too (--command=...,
		// ssh -o ProxyCommand=...).
		if _, v, ok := strings.Cut(w.Value, "="); ok && looksLikeCode(v) {
			e.guesses = append(e.guesses, v)
		}
	}
	return e
}

// maxCluster bounds the letters of a short option cluster read for an
// attached value; getopt takes a letter repeated (-vvvS'cmd'), so a
// longer cluster is opaque rather than cut.
const maxCluster = 16

// attachedValues returns what may be an attached option value in the
// short option cluster v: the rest of v after each of its leading
// letters. It reports false when the letters run past maxCluster.
func attachedValues(v string) ([]string, bool) {
	if len(v) < 3 || v[0] != '-' || v[1] == '-' {
		return nil, true
	}
	var out []string
	for k := 1; k < len(v)-1 && isOptionLetter(v[k]); k++ {
		if k > maxCluster {
			return out, false
		}
		if rest := v[k+1:]; looksLikeCode(rest) {
			out = append(out, rest)
		}
	}
	return out, true
}

func isOptionLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// substituted returns the words of xargs or find with the parts each
// fills in at run time made unknown: the {} of find -exec and xargs -I{},
// and the items xargs appends when it has no -I.
func substituted(ws []shell.Word, name string) []shell.Word {
	repl := "{}"
	appends := name == "xargs"
	if name == "xargs" {
		for i, w := range ws {
			switch {
			case !w.Literal:
			case w.Value == "-I" && i+1 < len(ws):
				repl, appends = ws[i+1].Value, false
			case strings.HasPrefix(w.Value, "-I") && len(w.Value) > 2:
				repl, appends = w.Value[2:], false
			case w.Value == "-i" || strings.HasPrefix(w.Value, "--replace"):
				appends = false
				if _, v, ok := strings.Cut(w.Value, "="); ok {
					repl = v
				}
			}
		}
	}
	// A wrapper's tail that starts at xargs or find is substituted already
	// (wrapped): it is returned as it is, not copied again, once per tail.
	var out []shell.Word
	for i, w := range ws {
		option := strings.HasPrefix(w.Value, "-I") || strings.HasPrefix(w.Value, "-i") || strings.HasPrefix(w.Value, "--replace") ||
			i > 0 && ws[i-1].Literal && ws[i-1].Value == "-I"
		if i > 0 && !option && repl != "" && w.Literal && strings.Contains(w.Value, repl) {
			if out == nil {
				out = append(make([]shell.Word, 0, len(ws)+1), ws[:i]...)
			}
			w = shell.Word{Value: w.Value}
		}
		if out != nil {
			out = append(out, w)
		}
	}
	if out == nil {
		out = ws
	}
	if appends && !(len(ws) > 0 && ws[len(ws)-1] == xargsItems) {
		out = append(out[:len(out):len(out)], xargsItems)
	}
	return out
}

// xargsItems stands for the words xargs appends to its command.
var xargsItems = shell.Word{Value: "<items read by xargs>", Split: true}

// shellEffect reads a shell's options: -c runs its first operand, a first
// operand without -c is a script file, and no operand reads standard
// input.
func shellEffect(c shell.Command, l line) effect {
	e := effect{runs: true}
	ws := c.Words[1:]
	cflag := false
	if leadingFlag(c.Words, 's', "oO") {
		// -s: the operands are arguments; the script is standard input.
		return stdinEffect(e, c.Stdin, l)
	}
	for i := 0; i < len(ws); i++ {
		w := ws[i]
		if !w.Literal {
			e.opaque = "its options or its script are known only at run time"
			return e
		}
		v := w.Value
		switch {
		case v == "--" || v == "-":
			if i+1 < len(ws) && v == "--" {
				return operandEffect(e, ws[i+1], cflag, l)
			}
			return stdinEffect(e, c.Stdin, l)
		case strings.HasPrefix(v, "--"):
			opt, val, hasVal := strings.Cut(v[2:], "=")
			switch opt {
			case "rcfile", "init-file", "command", "init-command":
				if !hasVal {
					if i++; i == len(ws) {
						return e
					}
					if !ws[i].Literal {
						e.opaque = "its options or its script are known only at run time"
						return e
					}
					val = ws[i].Value
				}
				if strings.HasSuffix(opt, "command") {
					e.code = append(e.code, val)
				} else {
					scriptFile(&e, val, l)
				}
			}
		case len(v) > 1 && (v[0] == '-' || v[0] == '+'):
			for _, f := range v[1:] {
				switch f {
				case 'c':
					cflag = true
				case 'o', 'O':
					i++ // the option's name
				}
			}
		default:
			return operandEffect(e, w, cflag, l)
		}
	}
	if cflag {
		return e // bash -c with no command string runs nothing
	}
	return stdinEffect(e, c.Stdin, l)
}

// operandEffect reads a shell's first operand: the script of -c, or a
// script file.
func operandEffect(e effect, w shell.Word, cflag bool, l line) effect {
	switch {
	case !w.Literal:
		e.opaque = "its script is known only at run time"
	case cflag:
		e.code = append(e.code, w.Value)
	default:
		scriptFile(&e, w.Value, l)
	}
	return e
}

// stdinEffect reads what a shell without a script reads: a literal
// here-document or here-string is judged as code; a pipe, a descriptor or
// anything known only at run time is opaque.
func stdinEffect(e effect, in *shell.Input, l line) effect {
	switch {
	case in == nil:
		e.opaque = "it reads commands from its standard input, which the line may feed"
	case !in.Literal || in.Kind == shell.FromDescriptor:
		e.opaque = "it reads commands from an input known only at run time"
	case in.Kind == shell.FromText:
		e.code = append(e.code, in.Value)
	default:
		scriptFile(&e, in.Value, l)
	}
	return e
}

// scriptFile notes that e runs the script file f. A file the policy
// cannot read is left to the rules for the program; one read from a
// descriptor, or that the same line names elsewhere (and so may write:
// echo ... > f.sh; sh f.sh), is opaque.
func scriptFile(e *effect, f string, l line) {
	switch {
	case f == "-" || f == "/dev/stdin" || strings.HasPrefix(f, "/dev/fd/") || strings.HasPrefix(f, "/proc/"):
		e.opaque = "it runs code read from a descriptor"
	case strings.Count(l.text, path.Base(f)) > 1:
		e.opaque = "it runs the file " + f + ", which the same command line may write"
	}
}

// evalEffect: eval runs its words joined by spaces.
func evalEffect(ws []shell.Word) effect {
	e := effect{runs: true}
	var b []string
	for i, w := range ws[1:] {
		if !w.Literal {
			e.opaque = "it runs a string known only at run time"
			return e
		}
		if i == 0 && w.Value == "--" {
			continue
		}
		b = append(b, w.Value)
	}
	if len(b) > 0 {
		e.code = append(e.code, strings.Join(b, " "))
	}
	return e
}

// trapEffect: trap ACTION SIGNAL... runs ACTION later; trap SIGNAL alone
// and trap - SIGNAL reset.
func trapEffect(ws []shell.Word) effect {
	e := effect{runs: true}
	var ops []shell.Word
	for i, w := range ws[1:] {
		if w.Literal && w.Value == "--" {
			ops = ws[i+2:]
			break
		}
		if w.Literal && strings.HasPrefix(w.Value, "-") && w.Value != "-" {
			continue
		}
		ops = ws[i+1:]
		break
	}
	if len(ops) < 2 {
		return e
	}
	switch a := ops[0]; {
	case !a.Literal:
		e.opaque = "its action is known only at run time"
	case a.Value != "" && a.Value != "-":
		e.code = append(e.code, a.Value)
	}
	return e
}

// operand returns the first word after options and "--".
func operand(ws []shell.Word) (shell.Word, bool) {
	for i, w := range ws {
		if w.Literal && w.Value == "--" {
			if i+1 < len(ws) {
				return ws[i+1], true
			}
			return shell.Word{}, false
		}
		if w.Literal && strings.HasPrefix(w.Value, "-") && len(w.Value) > 1 {
			continue
		}
		return w, true
	}
	return shell.Word{}, false
}

// leadingFlag reports whether one of the short option clusters before
// the first operand holds f. A cluster ending in a letter of withArg
// takes the next word as its value.
func leadingFlag(ws []shell.Word, f rune, withArg string) bool {
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		if !w.Literal || len(w.Value) < 2 || w.Value[0] != '-' || w.Value == "--" {
			return false
		}
		if w.Value[1] == '-' {
			continue
		}
		if strings.ContainsRune(w.Value[1:], f) {
			return true
		}
		if strings.IndexByte(withArg, w.Value[len(w.Value)-1]) >= 0 {
			i++
		}
	}
	return false
}

// hasFlag reports whether any short option cluster among ws[1:] holds f,
// for programs that take options after their operands.
func hasFlag(ws []shell.Word, f rune) bool {
	for _, w := range ws[1:] {
		if w.Literal && len(w.Value) > 1 && w.Value[0] == '-' && w.Value[1] != '-' && strings.ContainsRune(w.Value[1:], f) {
			return true
		}
	}
	return false
}

func hasLong(ws []shell.Word, names ...string) bool {
	for _, w := range ws[1:] {
		opt, _, _ := strings.Cut(w.Value, "=")
		if w.Literal && slices.Contains(names, opt) {
			return true
		}
	}
	return false
}

func isFindExec(c shell.Command) bool {
	return slices.ContainsFunc(c.Words[1:], func(w shell.Word) bool {
		return !w.Literal || slices.Contains([]string{"-exec", "-execdir", "-ok", "-okdir"}, w.Value)
	})
}

// globMayRunCode reports whether a glob program could name a shell, a
// wrapper or a program that runs code.
func globMayRunCode(prog shell.Word) bool {
	re, err := globRegexp(path.Base(prog.Pattern))
	if err != nil {
		return true
	}
	for _, list := range [][]string{shells, wrappers, codeRunners} {
		for _, n := range list {
			if re.MatchString(n) {
				return true
			}
		}
	}
	return false
}

// looksLikeCode reports whether a word has spaces or shell syntax, so a
// wrapper may run it as a command line.
func looksLikeCode(s string) bool {
	return strings.ContainsAny(s, " \t\n;&|<>()$`'\"\\")
}

// tarCode and rsyncCode are the long options whose value the program
// runs as a command line (tar through sh -c, rsync as its remote shell,
// which runs locally): tar -I 'rm f' -cf x . runs rm. tar's
// --checkpoint-action takes exec=CMD among other actions.
var (
	tarCode   = []string{"--use-compress-program", "--to-command", "--info-script", "--new-volume-script", "--rsh-command", "--checkpoint-action"}
	rsyncCode = []string{"--rsh"}
)

// tarOldStyle reports tar's first word as an old-style cluster (tar cIf
// prog x .) with a letter whose value, a later word, is a command line:
// which word is not told here, so it is opaque.
func tarOldStyle(ws []shell.Word) bool {
	return len(ws) > 1 && ws[1].Literal && !strings.HasPrefix(ws[1].Value, "-") && strings.ContainsAny(ws[1].Value, "IF")
}

// optionCode reads the options of ws whose value is a command line: the
// short letters (attached, -cI'cmd', or the next word) and the long names
// (--name=cmd or --name cmd, or a prefix of the name, which getopt_long
// takes). A value known only at run time, or an old-style cluster, is
// opaque. A letter taken for one that needs a value when it is another's
// value costs only a wrong guess judged as code, never an allow.
func optionCode(ws []shell.Word, short string, long []string, oldStyle bool) effect {
	var e effect
	if oldStyle {
		return effect{runs: true, opaque: "an old-style option cluster takes a command line from a later word"}
	}
	value := func(i int) (string, bool) {
		if i >= len(ws) || !ws[i].Literal {
			return "", false
		}
		return ws[i].Value, true
	}
	add := func(v string, ok bool, long string) {
		if !ok {
			e.runs, e.opaque = true, "an option that takes a command line has a value known only at run time"
			return
		}
		if long == "--checkpoint-action" {
			var exec bool
			if v, exec = strings.CutPrefix(v, "exec="); !exec {
				return
			}
		}
		e.runs, e.code = true, append(e.code, v)
	}
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		if !w.Literal {
			continue
		}
		if w.Value == "--" {
			break
		}
		if n, ok := strings.CutPrefix(w.Value, "--"); ok && len(n) >= 2 {
			n, v, attached := strings.Cut(n, "=")
			for _, l := range long {
				if !strings.HasPrefix(l, "--"+n) {
					continue
				}
				if attached {
					add(v, true, l)
				} else {
					i++
					v, ok := value(i)
					add(v, ok, l)
				}
				break
			}
			continue
		}
		if !strings.HasPrefix(w.Value, "-") || strings.HasPrefix(w.Value, "--") {
			continue
		}
		for k := 1; k < len(w.Value); k++ {
			if !strings.ContainsRune(short, rune(w.Value[k])) {
				continue
			}
			if rest := w.Value[k+1:]; rest != "" {
				add(rest, true, "")
			} else {
				i++
				v, ok := value(i)
				add(v, ok, "")
			}
			break
		}
	}
	return e
}
