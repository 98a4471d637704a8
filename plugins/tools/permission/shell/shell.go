// Package shell splits a bash command line into the simple commands it
// would run and the files it would write through redirections, so a policy
// can judge `git status && rm -rf ~` as two commands rather than as one
// string that happens to start with "git".
//
// It reads the command as mvdan.cc/sh parses it and never runs anything:
// every simple command is found, however deep it sits (after &&, ||, ;,
// in a pipe, a subshell, a block, a function body, a command substitution
// $(...) or `...` inside an argument, a process substitution, a here-doc).
// Words the shell would expand at run time (variables, substitutions,
// arithmetic) are reported as not literal: their value is unknown before
// the command runs.
package shell

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Word is one word of a command as the shell would pass it, when that is
// known before it runs.
type Word struct {
	// Value is the word after quote removal; for a word that is not
	// literal it is the word as written.
	Value string
	// Literal is false when the word expands at run time ($X, $(cmd), ...).
	Literal bool
}

// Command is one simple command: a program and its arguments.
type Command struct {
	// Words are the program and its arguments; never empty.
	Words []Word
	// Text is the command as written, for messages.
	Text string
}

// Program is the command's first word.
func (c Command) Program() Word { return c.Words[0] }

// Write is a redirection that writes to a file (>, >>, &>, >|, <>).
type Write struct {
	// Target is the file written, after quote removal when Literal.
	Target string
	// Literal is false when the target expands at run time.
	Literal bool
	// Text is the redirection as written.
	Text string
}

// Script is what a command line would run.
type Script struct {
	Commands []Command
	Writes   []Write
}

// Parse splits src, read as bash. Its error is the parser's, which names
// the line and column.
func Parse(src string) (Script, error) {
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return Script{}, err
	}
	var s Script
	text := func(n syntax.Node) string {
		start, end := int(n.Pos().Offset()), int(n.End().Offset())
		if start < 0 || end > len(src) || start > end {
			return ""
		}
		return src[start:end]
	}
	syntax.Walk(f, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.CallExpr:
			// Assignments alone (X=1) run no program; their substitutions
			// are still walked.
			if len(n.Args) > 0 {
				words := make([]Word, len(n.Args))
				for i, a := range n.Args {
					words[i] = word(a, text(a))
				}
				s.Commands = append(s.Commands, Command{Words: words, Text: text(n)})
			}
		case *syntax.DeclClause:
			// export, declare, local...: builtins the parser gives a node
			// of their own; judged like any other command.
			words := []Word{{Value: n.Variant.Value, Literal: true}}
			for _, a := range n.Args {
				words = append(words, assign(a, text(a)))
			}
			s.Commands = append(s.Commands, Command{Words: words, Text: text(n)})
		case *syntax.Redirect:
			if writes(n) {
				w := word(n.Word, text(n.Word))
				s.Writes = append(s.Writes, Write{Target: w.Value, Literal: w.Literal, Text: text(n)})
			}
		}
		return true
	})
	return s, nil
}

// writes reports whether r opens a file for writing. >&N and >&- duplicate
// or close a descriptor; >&word with any other word is bash's &>word.
func writes(r *syntax.Redirect) bool {
	switch r.Op {
	case syntax.RdrOut, syntax.AppOut, syntax.RdrInOut, syntax.RdrClob, syntax.AppClob,
		syntax.RdrAll, syntax.RdrAllClob, syntax.AppAll, syntax.AppAllClob:
		return true
	case syntax.DplOut:
		v, ok := literal(r.Word)
		if !ok {
			return true
		}
		return v != "-" && strings.Trim(v, "0123456789-") != ""
	}
	return false
}

func word(w *syntax.Word, written string) Word {
	if v, ok := literal(w); ok {
		return Word{Value: v, Literal: true}
	}
	return Word{Value: written}
}

func assign(a *syntax.Assign, written string) Word {
	if a.Name == nil || a.Array != nil || a.Index != nil {
		return Word{Value: written}
	}
	if a.Value == nil {
		return Word{Value: written, Literal: true}
	}
	v, ok := literal(a.Value)
	if !ok {
		return Word{Value: written}
	}
	op := "="
	if a.Append {
		op = "+="
	}
	return Word{Value: a.Name.Value + op + v, Literal: true}
}

// literal returns w's value after quote removal when nothing in it expands
// at run time.
func literal(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			b.WriteString(unescape(p.Value, false))
		case *syntax.SglQuoted:
			if p.Dollar {
				return "", false // $'...' has escapes of its own
			}
			b.WriteString(p.Value)
		case *syntax.DblQuoted:
			if p.Dollar {
				return "", false // $"..." is translated at run time
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					return "", false
				}
				b.WriteString(unescape(l.Value, true))
			}
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unescape removes the backslashes bash removes: before any character
// outside quotes (so \rm is rm), before $ ` " \ and newline inside double
// quotes. A backslash-newline is a line continuation and vanishes.
func unescape(s string, quoted bool) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' || i+1 == len(s) {
			b.WriteByte(c)
			continue
		}
		n := s[i+1]
		switch {
		case n == '\n':
			i++
		case !quoted || strings.IndexByte("$`\"\\", n) >= 0:
			b.WriteByte(n)
			i++
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
