package permission

import (
	"strings"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
)

// syntax is where a wrapper's command starts: after its options — those
// whose letter is in values take the next word as their value unless it
// is attached (-n5) — and after operands plain words (timeout's duration,
// ssh's host).
type syntax struct {
	values   string
	operands int
	code     string // options whose value is a command line (env -S, flock -c, ssh -o ProxyCommand=...)
}

// wrapperSyntax knows the wrappers whose command position can be told.
// A word known only at run time starts a tail only where the command may
// start: guessing every position would make `sudo cp "$SRC" x` opaque.
// Wrappers not listed take the command anywhere. Literal words start
// tails everywhere: a literal guess only adds what a rule denies or asks.
var wrapperSyntax = map[string]syntax{
	"sudo":     {values: "ugpChrtUDRT"},
	"doas":     {values: "uC"},
	"env":      {values: "uCP", code: "S"},
	"nice":     {values: "n"},
	"ionice":   {values: "cnp"},
	"chrt":     {operands: 1},
	"taskset":  {values: "c", operands: 1},
	"timeout":  {values: "sk", operands: 1},
	"stdbuf":   {values: "ioe"},
	"xargs":    {values: "adEeILlnPs"},
	"nohup":    {},
	"setsid":   {},
	"exec":     {values: "a"},
	"command":  {},
	"builtin":  {},
	"chroot":   {operands: 1},
	"watch":    {values: "nq"},
	"flock":    {values: "wE", operands: 1, code: "c"},
	"busybox":  {},
	"strace":   {values: "abeEIoOpPsSuX"},
	"ltrace":   {values: "aAeEnoOpsSuX"},
	"fakeroot": {values: "lsi"},
	"pkexec":   {},
	"ssh":      {values: "bcDEeFIiJLlmOpQRSWw", operands: 1, code: "o"},
}

// commandStarts marks the positions of ws where the wrapper's command may
// start. A long option without =value may or may not take the next word,
// and a word known only at run time may be anything: both ways are
// followed.
func commandStarts(ws []shell.Word, sx syntax) []bool {
	starts := make([]bool, len(ws)+1)
	type state struct{ i, left int }
	// seen holds one bit per operand count still to pass: operands is
	// small (a duration, a host), and a map of states cost more than the
	// rest of a long wrapper's reading.
	seen := make([]uint64, len(ws))
	var todo []state
	push := func(i, left int) {
		if i >= len(ws) {
			return
		}
		if left < 64 && seen[i]&(1<<left) != 0 {
			return
		}
		if left < 64 {
			seen[i] |= 1 << left
		}
		todo = append(todo, state{i, left})
	}
	// Through push, so that a wrapper alone (env, nice) has no start.
	push(1, sx.operands)
	for len(todo) > 0 {
		s := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		w := ws[s.i]
		v := w.Value
		switch {
		case !w.Literal:
			if s.left == 0 {
				starts[s.i] = true
			} else {
				push(s.i+1, s.left-1)
			}
			push(s.i+1, s.left) // an option
		case v == "--":
			push(s.i+1, s.left)
		case strings.HasPrefix(v, "--"):
			push(s.i+1, s.left)
			if !strings.Contains(v, "=") {
				push(s.i+2, s.left)
			}
		case len(v) > 1 && v[0] == '-':
			push(optionEnd(v, sx.values, s.i), s.left)
		case strings.Contains(v, "=") && isName(v[:strings.IndexByte(v, '=')]):
			push(s.i+1, s.left) // env NAME=value
		case s.left > 0:
			push(s.i+1, s.left-1)
		default:
			starts[s.i] = true
		}
	}
	return starts
}

// optionEnd returns where the word after the option cluster v at i is:
// past its value when a letter that takes one ends the cluster.
func optionEnd(v, values string, i int) int {
	for k := 1; k < len(v); k++ {
		if strings.IndexByte(values, v[k]) >= 0 {
			if k == len(v)-1 {
				return i + 2
			}
			return i + 1 // the value is attached: -n5
		}
	}
	return i + 1
}

func isName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// findCommands marks the positions where find's -exec, -execdir, -ok and
// -okdir commands may start: after those words, and after a word known
// only at run time, which may be one of them.
func findCommands(ws []shell.Word) []bool {
	starts := make([]bool, len(ws)+1)
	for i := 1; i+1 < len(ws); i++ {
		switch w := ws[i]; {
		case !w.Literal:
			starts[i+1] = true
		case w.Value == "-exec", w.Value == "-execdir", w.Value == "-ok", w.Value == "-okdir":
			starts[i+1] = true
		}
	}
	return starts
}

// codeUnknown reports whether an option of sx whose value is a command
// line is given a value known only at run time (env -S "$X").
func codeUnknown(ws []shell.Word, sx syntax) bool {
	if sx.code == "" {
		return false
	}
	for i := 1; i+1 < len(ws); i++ {
		v := ws[i].Value
		if ws[i].Literal && len(v) == 2 && v[0] == '-' && strings.IndexByte(sx.code, v[1]) >= 0 && !ws[i+1].Literal {
			return true
		}
	}
	return false
}
