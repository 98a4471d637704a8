package permission

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
	"github.com/dsh-go/dsh/services/tools"
)

// ReadOnlyPrograms are the programs a read-only bash command may run, each
// with the options that would make it write (or run another program)
// refused by ReadOnlyCommand: sed without -i, find without -exec or
// -delete, git with subcommands that only read.
var ReadOnlyPrograms = []string{
	"ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "rg", "pwd", "echo", "printf", "true", "false",
	"test", "[", "which", "file", "stat", "du", "df", "tree", "diff", "cmp", "basename", "dirname", "realpath",
	"readlink", "cut", "tr", "nl", "uniq", "sort", "find", "sed", "git", "jq", "whoami", "id", "uname", "date",
	"sha256sum", "sha1sum", "md5sum", "od", "hexdump", "strings", "column", "comm", "paste", "fold", "cd",
}

// gitReading are the git subcommands that only read the repository.
var gitReading = []string{
	"status", "log", "diff", "show", "blame", "ls-files", "ls-tree", "rev-parse", "describe", "shortlog", "cat-file", "grep",
}

var (
	readOnlyOnce   sync.Once
	readOnlyPolicy *policy
)

// readOnly is the policy ReadOnlyCommand judges by: read-only mode (no
// redirection to a file, no opaque code, nothing another program runs),
// with a rule allowing each of ReadOnlyPrograms.
func readOnly() *policy {
	readOnlyOnce.Do(func() {
		cfg := Config{Mode: ReadOnly}
		for _, prog := range ReadOnlyPrograms {
			cfg.Rules = append(cfg.Rules, Rule{Tool: BashTool, Command: globEscape(prog) + " *", Decision: tools.Allow})
		}
		p, err := newPolicy(cfg, "read-only bash")
		if err != nil {
			panic(err) // the list above is fixed: a test covers it
		}
		readOnlyPolicy = p
	})
	return readOnlyPolicy
}

// ReadOnlyCommand reports whether a bash command line only reads: it is
// read by the same parser and rules as the policy's (every simple command
// of pipes, lists, substitutions and inline scripts), each must be one of
// ReadOnlyPrograms without an option that writes, and no redirection may
// write a file. Whatever cannot be read before it runs is not read-only.
// why says, otherwise, what may write. Plan mode runs bash only when this
// holds.
func ReadOnlyCommand(command, workspace string) (ok bool, why string) {
	script, err := shell.Parse(command)
	if err != nil {
		return false, fmt.Sprintf("the command could not be read as bash (%v)", err)
	}
	p := readOnly()
	for _, pt := range p.judgeScript(script, line{text: command, workspace: workspace}) {
		if !pt.decided || pt.v.Decision != tools.Allow {
			if !pt.decided {
				return false, pt.subject + " cannot be judged"
			}
			return false, pt.v.Reason
		}
	}
	return readOnlyScript(script, 0)
}

func readOnlyScript(script shell.Script, depth int) (bool, string) {
	for _, c := range script.Commands {
		if ok, why := readOnlyArgs(c); !ok {
			return false, why
		}
	}
	for _, code := range append(append([]string(nil), script.Subscripts...), script.Code...) {
		if depth >= maxDepth {
			return false, "it nests code too deep to read"
		}
		s, err := shell.Parse(": " + code)
		if err != nil {
			continue // code that does not parse runs nothing the parse above did not see
		}
		if ok, why := readOnlyScript(s, depth+1); !ok {
			return false, why
		}
	}
	return true, ""
}

// readOnlyArgs refuses the options of a listed program that write a file
// or run another program.
func readOnlyArgs(c shell.Command) (bool, string) {
	if len(c.Words) == 0 {
		return true, ""
	}
	name := path.Base(c.Program().Value)
	args := c.Words[1:]
	bad := func(what string) (bool, string) {
		return false, fmt.Sprintf("the command %q %s", c.Text, what)
	}
	for _, w := range args {
		if !w.Literal {
			// An option known only at run time could be any of those
			// refused below.
			if slices.Contains([]string{"sed", "find", "git", "sort", "tree", "date", "file", "rg", "uniq"}, name) {
				return bad("has words known only at run time, which could be an option that writes")
			}
		}
	}
	switch name {
	case "sed":
		for i := 0; i < len(args); i++ {
			v := args[i].Value
			switch {
			case v == "--":
				i = len(args)
			case strings.HasPrefix(v, "--in-place"):
				return bad("edits files in place (--in-place)")
			case strings.HasPrefix(v, "--file") || v == "--expression" || strings.HasPrefix(v, "--expression="):
				if strings.HasPrefix(v, "--file") {
					return bad("reads its script from a file, which cannot be checked")
				}
			case len(v) > 1 && v[0] == '-' && v[1] != '-':
				for k := 1; k < len(v); k++ {
					if v[k] == 'i' {
						return bad("edits files in place (-i)")
					}
					if v[k] == 'f' {
						return bad("reads its script from a file, which cannot be checked")
					}
					if v[k] == 'e' || v[k] == 'l' {
						break
					}
				}
			}
		}
		for _, s := range sedScripts(c.Words) {
			if runs, writes := sedScan(s); runs || writes {
				return bad("has a sed script that writes a file or runs a command")
			}
		}
	case "find":
		for _, w := range args {
			switch w.Value {
			case "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls":
				return bad(fmt.Sprintf("uses %s, which runs a command or writes", w.Value))
			}
		}
	case "git":
		i := 0
		for i < len(args) && strings.HasPrefix(args[i].Value, "-") {
			switch v := args[i].Value; {
			case v == "-C":
				i += 2
			case v == "--no-pager":
				i++
			default:
				return bad(fmt.Sprintf("passes git the option %s, of which only -C and --no-pager are read-only here", v))
			}
		}
		if i >= len(args) || !slices.Contains(gitReading, args[i].Value) {
			return bad("runs a git subcommand that is not one of " + strings.Join(gitReading, ", "))
		}
		for _, w := range args[i+1:] {
			if v := w.Value; strings.HasPrefix(v, "--output") || strings.HasPrefix(v, "-O") || strings.HasPrefix(v, "--open-files-in-pager") || strings.HasPrefix(v, "--ext-diff") {
				return bad(fmt.Sprintf("passes %s, which writes a file or runs a program", v))
			}
		}
	case "sort":
		for _, w := range args {
			if v := w.Value; strings.HasPrefix(v, "--output") || strings.HasPrefix(v, "--compress-program") ||
				len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.ContainsRune(v, 'o') {
				return bad("writes its output to a file (-o)")
			}
		}
	case "tree":
		for _, w := range args {
			if strings.HasPrefix(w.Value, "-o") {
				return bad("writes its output to a file (-o)")
			}
		}
	case "date":
		for _, w := range args {
			if v := w.Value; strings.HasPrefix(v, "--set") || len(v) > 1 && v[0] == '-' && v[1] != '-' && strings.ContainsRune(v, 's') {
				return bad("sets the clock (-s)")
			}
		}
	case "file":
		for _, w := range args {
			if v := w.Value; v == "-C" || v == "--compile" {
				return bad("compiles a magic file (-C)")
			}
		}
	case "rg":
		for _, w := range args {
			if strings.HasPrefix(w.Value, "--pre") && !strings.HasPrefix(w.Value, "--pre-glob") {
				return bad("runs a preprocessor command (--pre)")
			}
		}
	case "uniq":
		operands := 0
		for _, w := range args {
			if !strings.HasPrefix(w.Value, "-") || w.Value == "-" {
				operands++
			}
		}
		if operands > 1 {
			return bad("writes its second operand")
		}
	}
	return true, ""
}

// globEscape quotes the glob characters of a program name ("[").
func globEscape(s string) string {
	return strings.NewReplacer("[", "[[]", "*", "[*]", "?", "[?]").Replace(s)
}
