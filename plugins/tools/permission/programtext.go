package permission

import (
	"slices"
	"strings"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
)

// programTextRuns returns why c, a program that reads a program text of
// its own (awk, sed, gdb, expect), runs commands the policy cannot read;
// "" when its text holds no construct that runs one, so
// `awk '{print $1}'` stays what it is.
func programTextRuns(ws []shell.Word, name string) string {
	switch name {
	case "awk", "gawk", "mawk", "nawk":
		for _, w := range ws[1:] {
			if w.Literal && (strings.Contains(w.Value, "system") || strings.Contains(w.Value, "|")) {
				return "its awk program runs commands (system() or a pipe)"
			}
		}
	case "sed", "gsed":
		for _, s := range sedScripts(ws) {
			if sedRuns(s) {
				return "its sed script runs commands (the e command or the e flag of s)"
			}
		}
	case "gdb":
		for _, w := range ws[1:] {
			if w.Literal && gdbRuns(w.Value) {
				return "a gdb command it is given runs a shell (shell, !, pipe, python)"
			}
		}
	case "expect":
		for _, w := range ws[1:] {
			if w.Literal && (strings.Contains(w.Value, "spawn") || strings.Contains(w.Value, "exec") || strings.Contains(w.Value, "system")) {
				return "its expect script runs commands (spawn, exec, system)"
			}
		}
	}
	return ""
}

// gdbRuns reports whether a word may be a gdb command that runs a shell
// or a script interpreter.
func gdbRuns(v string) bool {
	v = strings.TrimSpace(v)
	if strings.HasPrefix(v, "!") || strings.HasPrefix(v, "|") {
		return true
	}
	first, _, _ := strings.Cut(v, " ")
	switch first {
	case "shell", "pipe", "python", "py", "python-interactive", "pi", "guile", "gu", "source", "compile":
		return true
	}
	return false
}

// gitConfigCode adds to e the commands git's -c settings make it run:
// core.sshCommand, core.pager, core.editor, credential.helper,
// diff.external, an alias starting with !... A value from the
// environment (--config-env) or known only at run time is opaque.
func gitConfigCode(e *effect, ws []shell.Word) {
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		var kv string
		switch {
		case !w.Literal:
			continue
		case w.Value == "-c" && i+1 < len(ws):
			i++
			if !ws[i].Literal {
				e.runs, e.opaque = true, "a -c setting of git is known only at run time and may name a command"
				return
			}
			kv = ws[i].Value
		case strings.HasPrefix(w.Value, "-c") && len(w.Value) > 2:
			kv = w.Value[2:]
		case w.Value == "--config-env" || strings.HasPrefix(w.Value, "--config-env="):
			e.runs, e.opaque = true, "git --config-env takes a setting from the environment, which may name a command"
			return
		default:
			continue
		}
		key, val, _ := strings.Cut(kv, "=")
		key = strings.ToLower(key)
		if strings.HasPrefix(key, "alias.") {
			e.runs, e.code = true, append(e.code, aliasCode(val))
			continue
		}
		switch kind, why := gitKey(key, val); kind {
		case gitKeyOpaque:
			e.runs, e.opaque = true, "git -c "+why
			return
		case gitKeyCode:
			e.runs, e.code = true, append(e.code, strings.TrimPrefix(strings.TrimSpace(val), "!"))
		}
	}
}

// aliasCode is the command line a git alias runs: after a !, a shell
// command; otherwise git itself with the alias's words, whose options may
// name a command as surely as on the line (alias.l='ls-remote
// --upload-pack=cmd .', alias.d='difftool -x cmd'), so it is judged as
// that git command.
func aliasCode(val string) string {
	if c, ok := strings.CutPrefix(strings.TrimSpace(val), "!"); ok {
		return c
	}
	return "git " + val
}

// gitOpaqueWord returns why a word of a git command makes git run
// something the line does not show: an ext:: URL (git clone
// 'ext::cmd'), whose command git runs once the transport is allowed, and
// --template, whose hook scripts a new repository gets; "" otherwise.
func gitOpaqueWord(w shell.Word) string {
	switch {
	case !w.Literal:
		return ""
	case strings.HasPrefix(strings.ToLower(w.Value), "ext::"):
		return "git's ext:: transport runs the command its URL names"
	case w.Value == "--template" || strings.HasPrefix(w.Value, "--template="):
		return "git --template copies hook scripts from a directory the policy does not read into the repository"
	}
	return ""
}

// gitLongCode are git options, of any subcommand, whose value is a
// command git runs through the shell: the program at the other end of a
// local transport (git ls-remote --upload-pack='cmd' .), difftool's
// command. push, archive, send-pack and fetch-pack also take --exec.
var gitLongCode = []string{"--upload-pack", "--receive-pack", "--extcmd"}

// gitShortCode are the short options of a subcommand whose value is such
// a command: difftool -x, clone -u, grep -O (its value attached only).
var gitShortCode = map[string]byte{"difftool": 'x', "clone": 'u', "grep": 'O'}

// gitConfigSet judges the value git config stores under a key whose value
// git runs later (git config alias.st '!cmd', core.pager 'cmd'): a later
// git command would run it as surely as git -c does now. Its value is
// taken as the word after the key, in both the old form and `git config
// set`.
func gitConfigSet(e *effect, ws []shell.Word) {
	for i := 0; i+1 < len(ws); i++ {
		w := ws[i]
		if !w.Literal || strings.HasPrefix(w.Value, "-") || w.Value == "set" {
			continue
		}
		key := strings.ToLower(w.Value)
		v := ws[i+1]
		kind, why := gitKey(key, v.Value)
		isAlias := strings.HasPrefix(key, "alias.")
		if kind == gitKeyInert && !isAlias {
			return
		}
		e.runs = true
		switch {
		case !v.Literal:
			e.opaque = "git config stores a setting known only at run time under " + key + ", which may name a command git runs later"
		case isAlias:
			e.code = append(e.code, aliasCode(v.Value))
		case kind == gitKeyOpaque:
			e.opaque = "git config stores a setting git acts on later: " + why
		default:
			e.code = append(e.code, strings.TrimPrefix(strings.TrimSpace(v.Value), "!"))
		}
		return
	}
}

// gitCommandKeys end the names of git settings whose value is a command
// git runs with sh -c.
var gitCommandKeys = []string{"command", "pager", "editor", "helper", "external", "fsmonitor", "askpass",
	"program", "cmd", "textconv", "driver", "clean", "smudge", "process"}

// sgEffect: sg GROUP [-c] COMMAND runs COMMAND with /bin/sh -c.
func sgEffect(ws []shell.Word) effect {
	e := effect{runs: true}
	ops, ok := operandsAfterOptions(ws[1:])
	if !ok {
		e.opaque = "its group or command is known only at run time"
		return e
	}
	if len(ops) < 2 {
		e.opaque = "it starts a shell, which reads commands from its standard input"
		return e
	}
	rest := ops[1:]
	if rest[0].Value == "-c" {
		rest = rest[1:]
	}
	var b []string
	for _, w := range rest {
		if !w.Literal {
			e.opaque = "its command is known only at run time"
			return e
		}
		b = append(b, w.Value)
	}
	if len(b) > 0 {
		e.code = append(e.code, strings.Join(b, " "))
	}
	return e
}

// operandsAfterOptions returns ws from the first word that is not an
// option on; false when a word before it is known only at run time.
func operandsAfterOptions(ws []shell.Word) ([]shell.Word, bool) {
	for i, w := range ws {
		if !w.Literal {
			return nil, false
		}
		if w.Value == "-" || !strings.HasPrefix(w.Value, "-") {
			return ws[i:], true
		}
	}
	return nil, true
}

// gitEffect reads the shell commands git runs from its own options:
// rebase -x/--exec, submodule foreach, the filters of filter-branch.
// They are judged as code; a command known only at run time is opaque.
func gitEffect(ws []shell.Word) effect {
	var e effect
	gitConfigCode(&e, ws)
	if e.opaque != "" {
		return e
	}
	add := func(w shell.Word) {
		e.runs = true
		if !w.Literal {
			e.opaque = "a command git runs is known only at run time"
			return
		}
		e.code = append(e.code, w.Value)
	}
	sub := gitSubcommand(ws)
	for _, w := range ws[1:max(sub, 1)] {
		if w.Literal && strings.HasPrefix(w.Value, "--exec-path=") {
			e.runs, e.opaque = true, "git --exec-path= runs git's own commands from a directory the policy does not read"
			return e
		}
	}
	if sub < 0 {
		return e
	}
	cmd := ws[sub].Value
	if cmd == "config" {
		gitConfigSet(&e, ws[sub+1:])
	}
	for i := sub + 1; i < len(ws); i++ {
		w := ws[i]
		if why := gitOpaqueWord(w); why != "" {
			e.runs, e.opaque = true, why
			return e
		}
		if !w.Literal {
			continue
		}
		opt, val, hasVal := strings.Cut(w.Value, "=")
		if letter, ok := gitShortCode[cmd]; ok && len(w.Value) > 1 && w.Value[0] == '-' && w.Value[1] != '-' {
			// difftool -yx 'cmd', clone -u'cmd', grep -O'cmd': the letter
			// may close a cluster (its value the next word) or carry it.
			if k := strings.IndexByte(w.Value, letter); k > 0 {
				switch {
				case k+1 < len(w.Value):
					add(shell.Word{Value: w.Value[k+1:], Literal: true})
				case letter != 'O' && i+1 < len(ws):
					i++
					add(ws[i])
				}
				continue
			}
		}
		switch {
		case cmd == "rebase" && (opt == "-x" || opt == "--exec"),
			cmd == "filter-branch" && strings.HasPrefix(opt, "--") && strings.HasSuffix(opt, "-filter"),
			slices.Contains(gitLongCode, opt), opt == "--exec" && cmd != "rebase":
			if hasVal {
				add(shell.Word{Value: val, Literal: true})
			} else if i+1 < len(ws) {
				i++
				add(ws[i])
			}
		case opt == "--open-files-in-pager" && hasVal:
			add(shell.Word{Value: val, Literal: true})
		case cmd == "submodule" && w.Value == "foreach":
			rest := ws[i+1:]
			for len(rest) > 0 && rest[0].Literal && strings.HasPrefix(rest[0].Value, "-") {
				rest = rest[1:]
			}
			var b []string
			for _, r := range rest {
				if !r.Literal {
					e.runs, e.opaque = true, "a command git runs is known only at run time"
					return e
				}
				b = append(b, r.Value)
			}
			if len(b) > 0 {
				add(shell.Word{Value: strings.Join(b, " "), Literal: true})
			}
			return e
		}
	}
	return e
}
