package commands

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/lazyregexp"
)

// Invocation is a prompt of the form "/name args".
type Invocation struct {
	Name string
	// Args is the rest of the line and what follows it, trimmed, as the
	// user typed it.
	Args string
}

// Parse reports whether text invokes a command. Text that starts with a
// slash but whose first word is not a possible command name — a path such
// as /usr/bin/env, a lone slash — is not an invocation and reaches the
// model as written.
func Parse(text string) (Invocation, bool) {
	if !strings.HasPrefix(text, "/") {
		return Invocation{}, false
	}
	word, rest, _ := strings.Cut(text[1:], " ")
	if i := strings.IndexAny(word, "\t\n\r"); i >= 0 {
		word, rest = word[:i], word[i:]+" "+rest
	}
	if !validInvocation.MatchString(word) {
		return Invocation{}, false
	}
	return Invocation{Name: word, Args: strings.TrimSpace(rest)}, true
}

// validInvocation is a name, or a namespaced one ("frontend:component").
var validInvocation = lazyregexp.New(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)*$`)

var (
	// placeholder finds $ARGUMENTS, $ARGUMENTS[N] and $N.
	placeholder = lazyregexp.New(`\$ARGUMENTS\[(\d+)\]|\$ARGUMENTS|\$(\d+)`)
	// bang finds a !`command` line, which Claude Code runs in a shell
	// before sending the prompt.
	bang = lazyregexp.New("!`[^`\n]+`")
)

var (
	// fileRef finds an @path reference, which Claude Code replaces with
	// the file's contents: an @ at the start of a word, then a path.
	fileRef = lazyregexp.New(`(?:^|[\s(])@([A-Za-z0-9_.~/][^\s)]*)`)
	// zero finds $0, which command files do not use as a placeholder.
	zero = lazyregexp.New(`\$0\b`)
	// sessionVar finds ${CLAUDE_SESSION_ID}.
	sessionVar = lazyregexp.New(`\$\{CLAUDE_SESSION_ID\}`)
)

// Unapplied lists what of c dsh reads but does not do as Claude Code
// does, each naming the file and what dsh does instead, so an invocation
// that differs says so rather than differing in silence. The model and
// allowed-tools are logged apart (see prepare).
func Unapplied(c Command) []string {
	var out []string
	if len(c.unread) > 0 {
		out = append(out, fmt.Sprintf("%s: front matter %s: dsh does not read these keys (it reads %s); the command runs as a prompt in the agent's own turn without them",
			c.File, strings.Join(c.unread, ", "), strings.Join(readKeys, ", ")))
	}
	at := func(i int) int { return c.bodyLine + strings.Count(c.Body[:i], "\n") }
	if m := fileRef.Regexp().FindStringSubmatchIndex(c.Body); m != nil {
		out = append(out, fmt.Sprintf("%s:%d: @%s is left as written, not replaced by the file's contents as Claude Code does; the model reads the file with its tools if it needs it",
			c.File, at(m[2]), c.Body[m[2]:m[3]]))
	}
	if m := zero.FindStringIndex(c.Body); m != nil {
		out = append(out, fmt.Sprintf("%s:%d: $0 is left as written: in a command file the first argument is $1 (use $ARGUMENTS[0] for a file meant for both)", c.File, at(m[0])))
	}
	if m := sessionVar.FindStringIndex(c.Body); m != nil {
		out = append(out, fmt.Sprintf("%s:%d: ${CLAUDE_SESSION_ID} is left as written; dsh does not fill it in", c.File, at(m[0])))
	}
	return out
}

// Expand renders c's body for args as the model receives it: $ARGUMENTS is
// the whole argument text, $1…$N the arguments split as a shell splits
// words (quotes keep spaces), counting from 1 as Claude Code's command
// files do, $ARGUMENTS[N] the same counting from 0; a missing one is
// empty. A body with no placeholder gets "ARGUMENTS: …" appended when
// arguments were given, so they are never lost. A body that asks for a
// shell command (!`…`) is refused: dsh does not run shell commands outside
// the tool pipeline, where approval and the sandbox apply.
func Expand(c Command, args string) (string, error) {
	if loc := bang.FindStringIndex(c.Body); loc != nil {
		line := c.bodyLine + strings.Count(c.Body[:loc[0]], "\n")
		return "", errs.New(Unsupported, fmt.Sprintf(
			"/%s runs a shell command (%s, %s:%d) before the prompt is sent, which dsh does not do: shell commands run only as the model's bash calls, through approval and the sandbox. Replace it with an instruction to run the command, e.g. \"Run `%s` and use its output\"",
			c.Qualified(), c.Body[loc[0]:loc[1]], c.File, line, strings.Trim(c.Body[loc[0]+1:loc[1]], "`"))).WithReason("commands/shell")
	}
	words := splitWords(args)
	used := false
	body := placeholder.ReplaceAllStringFunc(c.Body, func(m string) string {
		sub := placeholder.FindStringSubmatch(m)
		used = used || sub[2] != "0"
		switch {
		case sub[1] != "":
			i, _ := strconv.Atoi(sub[1])
			return word(words, i)
		case sub[2] != "":
			i, _ := strconv.Atoi(sub[2])
			if i == 0 {
				return m // $0 is no placeholder of command files: left as written
			}
			return word(words, i-1)
		default:
			return args
		}
	})
	if !used && args != "" {
		body += "\n\nARGUMENTS: " + args
	}
	return body, nil
}

func word(words []string, i int) string {
	if i < len(words) {
		return words[i]
	}
	return ""
}

// splitWords splits s at blanks outside quotes; quotes are removed, and a
// backslash outside single quotes keeps the next character.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	in, quote, esc := false, rune(0), false
	for _, r := range s {
		switch {
		case esc:
			cur.WriteRune(r)
			esc = false
		case r == '\\' && quote != '\'':
			esc, in = true, true
		case quote != 0:
			if r == quote {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

// Message is the text stored and sent for an invocation: what the user
// typed, in the tags Claude Code records it with, then the expanded
// prompt. Both stay in the session log, and the model sees which command
// it is following.
func Message(inv Invocation, expanded string) string {
	var b strings.Builder
	b.WriteString("<command-name>/")
	b.WriteString(inv.Name)
	b.WriteString("</command-name>\n")
	if inv.Args != "" {
		b.WriteString("<command-args>")
		b.WriteString(inv.Args)
		b.WriteString("</command-args>\n")
	}
	b.WriteString("\n")
	b.WriteString(expanded)
	return b.String()
}
