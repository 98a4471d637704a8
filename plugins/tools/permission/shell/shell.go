// Package shell splits a bash command line into the simple commands it
// would run and the files it would write through redirections, so a policy
// can judge `git status && rm -rf ~` as two commands rather than as one
// string that happens to start with "git".
//
// It reads the command as mvdan.cc/sh parses it and never runs anything:
// every simple command is found, however deep it sits (after &&, ||, ;,
// in a pipe, a subshell, a block, a function body, a command substitution
// $(...) or `...` inside an argument, a process substitution, a here-doc).
// Words are read as far as the shell would expand them without running
// anything: quotes and backslashes removed, $'...' decoded, braces
// expanded. A word with an unquoted glob is reported as a glob, and words
// the shell would expand at run time (variables, substitutions,
// arithmetic) as not literal, with whether splitting may make them several
// words. A command's own standard input redirection, strings that hold
// command substitutions, array subscripts that bash evaluates and that
// hold one, and the variables a line assigns are reported too, for a
// policy that must know what code a shell would read.
package shell

import (
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

// Word is one word of a command as the shell would pass it, when that is
// known before it runs.
type Word struct {
	// Value is the word after quote removal and $'...' decoding; for a
	// word that is not literal it is the word as written.
	Value string
	// Literal is false when the word expands at run time ($X, $(cmd), ...).
	Literal bool
	// Glob is set on a literal word with an unquoted *, ? or [ (or an
	// extended glob): the shell replaces it by the names of the files it
	// matches, which may be several words.
	Glob bool
	// Pattern is a Glob word as a glob: its quoted characters escaped
	// with a backslash, an extended glob read as *.
	Pattern string
	// Split is set on a word that is not literal and that splitting may
	// turn into no word or several ($X, $(cmd) outside quotes, "$@").
	Split bool
}

// Exact reports whether the word is one known word.
func (w Word) Exact() bool { return w.Literal && !w.Glob }

// Command is one simple command: a program and its arguments.
type Command struct {
	// Words are the program and its arguments, brace expansions expanded;
	// never empty.
	Words []Word
	// Text is the command as written, for messages.
	Text string
	// Stdin is where the command's own redirections point its standard
	// input; nil when it reads what it inherits (a pipe, or the caller's).
	Stdin *Input
}

// Program is the command's first word.
func (c Command) Program() Word { return c.Words[0] }

// InputKind says what a redirection of standard input reads.
type InputKind int

// Kinds of Input.
const (
	// FromFile: < file or <> file; Value is the file.
	FromFile InputKind = iota
	// FromText: a here-document or here-string; Value is its text.
	FromText
	// FromDescriptor: <&N, a descriptor opened elsewhere.
	FromDescriptor
)

// Input is a command's redirection of its standard input.
type Input struct {
	Kind InputKind
	// Value is the file or the text, when Literal.
	Value string
	// Literal is false when the file or text is known only at run time.
	Literal bool
}

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
	// Code are literal strings (arguments, assigned values) that hold a
	// command substitution: bash runs such a string when it evaluates a
	// variable holding it as arithmetic (x='a[$(cmd)]'; (( x ))).
	Code []string
	// Assigned are the names of the variables the line assigns, before a
	// command (X=1 cmd), alone (X=1) or through export, declare, local.
	Assigned []string
	// Values are the assignments of Assigned whose name is a plain one
	// (not an array element), with the value assigned: a value known
	// only at run time is a Word that is not literal.
	Values []Assignment
	// Names are the words known only at run time that bash evaluates as
	// a variable name (${!x}, declare "$x", unset "$x", read "$x",
	// printf -v "$x", test -v "$x", [[ -v $x ]], let "$x"): a value like
	// a[$(cmd)] runs cmd, as eval would.
	Names []string
	// Prompts counts the ${x@P} expansions: bash expands the value of x
	// as a prompt string, running the command substitutions it holds,
	// as eval would.
	Prompts int
	// Subscripts are literal strings with an array subscript holding a
	// substitution ('a[$(cmd)]') where bash evaluates them: operands of
	// declare, printf -v, read, unset, test -v and the like, and
	// arithmetic ($(( )), (( )), let, [[ -eq ]]). Bash runs what the
	// subscript holds, so they are code.
	Subscripts []string
}

// Assignment is one variable a line assigns and its value.
type Assignment struct {
	Name  string
	Value Word
}

// subscriptBuiltins evaluate an operand's array subscript: a variable
// name they assign, test or unset.
var subscriptBuiltins = map[string]bool{"declare": true, "typeset": true, "local": true, "readonly": true,
	"export": true, "printf": true, "read": true, "unset": true, "test": true, "[": true, "let": true,
	"mapfile": true, "readarray": true, "wait": true}

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
		case *syntax.Stmt:
			// A simple command is always a statement's: its redirections
			// are the statement's.
			call, ok := n.Cmd.(*syntax.CallExpr)
			if !ok {
				break
			}
			for _, a := range call.Assigns {
				if a.Name != nil {
					s.Assigned = append(s.Assigned, a.Name.Value)
				}
				if a.Value != nil {
					s.code(word(a.Value, ""))
				}
				if a.Name != nil && a.Index == nil && a.Array == nil {
					v := Word{Literal: true}
					if a.Value != nil {
						v = word(a.Value, text(a.Value))
					}
					s.Values = append(s.Values, Assignment{Name: a.Name.Value, Value: v})
				}
			}
			// Assignments alone (X=1) run no program; their substitutions
			// are still walked.
			if len(call.Args) > 0 {
				ws := make([]Word, 0, len(call.Args))
				for _, a := range call.Args {
					ws = appendWords(ws, a, text(a))
				}
				for _, w := range ws {
					s.code(w)
				}
				if takesSubscripts(ws) {
					for _, w := range ws[1:] {
						s.subscript(w)
					}
					s.names(ws)
				}
				if len(ws) > 0 {
					s.Commands = append(s.Commands, Command{Words: ws, Text: text(call), Stdin: input(n.Redirs)})
				}
			}
		case *syntax.LetClause:
			// let 'x=a[$(cmd)]' evaluates its quoted words as arithmetic.
			for _, e := range n.Exprs {
				if w, ok := e.(*syntax.Word); ok {
					s.code(word(w, ""))
					if ww := word(w, text(w)); !ww.Literal {
						s.Names = append(s.Names, ww.Value)
					}
				}
				s.arithm(e)
			}
		case *syntax.ArithmExp:
			s.arithm(n.X)
		case *syntax.ArithmCmd:
			s.arithm(n.X)
		case *syntax.CStyleLoop:
			s.arithm(n.Init)
			s.arithm(n.Cond)
			s.arithm(n.Post)
		case *syntax.ParamExp:
			if n.Index != nil {
				s.arithm(n.Index)
				s.index(n.Index)
			}
			if n.Excl && n.Names == 0 && n.Index == nil {
				s.Names = append(s.Names, text(n)) // ${!x}: the value of x is a name
			}
			if n.Exp != nil && n.Exp.Op == syntax.OtherParamOps && n.Exp.Word != nil && n.Exp.Word.Lit() == "P" {
				s.Prompts++
			}
		case *syntax.Assign:
			if n.Index != nil {
				s.arithm(n.Index)
				s.index(n.Index)
			}
		case *syntax.BinaryTest:
			// [[ x -eq y ]] and the other numeric tests evaluate both
			// sides as arithmetic.
			switch n.Op {
			case syntax.TsEql, syntax.TsNeq, syntax.TsLss, syntax.TsLeq, syntax.TsGtr, syntax.TsGeq:
				for _, x := range []syntax.TestExpr{n.X, n.Y} {
					if w, ok := x.(*syntax.Word); ok {
						s.subscript(word(w, ""))
					}
				}
			}
		case *syntax.UnaryTest:
			if n.Op == syntax.TsVarSet {
				if w, ok := n.X.(*syntax.Word); ok {
					s.subscript(word(w, ""))
					if ww := word(w, text(w)); !ww.Literal {
						s.Names = append(s.Names, ww.Value)
					}
				}
			}
		case *syntax.DeclClause:
			// export, declare, local...: builtins the parser gives a node
			// of their own; judged like any other command.
			ws := []Word{{Value: n.Variant.Value, Literal: true}}
			for _, a := range n.Args {
				if a.Name != nil {
					s.Assigned = append(s.Assigned, a.Name.Value)
				}
				w := assign(a, text(a))
				s.code(w)
				s.subscript(w)
				if a.Name == nil && !w.Literal {
					s.Names = append(s.Names, w.Value) // declare "$x"
				}
				if a.Name != nil && a.Index == nil && a.Array == nil && a.Value != nil {
					v := Word{Value: text(a.Value)}
					if _, val, ok := strings.Cut(w.Value, "="); ok && w.Literal {
						v = Word{Value: val, Literal: true}
					}
					s.Values = append(s.Values, Assignment{Name: a.Name.Value, Value: v})
				}
				ws = append(ws, w)
			}
			s.Commands = append(s.Commands, Command{Words: ws, Text: text(n)})
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

// subscript notes w when it is literal and has an array subscript that
// holds a substitution.
func (s *Script) subscript(w Word) {
	v := w.Value
	if w.Literal && strings.Contains(v, "[") && (strings.Contains(v, "$(") || strings.Contains(v, "`") || strings.Contains(v, "${")) {
		s.Subscripts = append(s.Subscripts, v)
	}
}

// index notes the quoted strings of an array subscript written in place
// (${a['$(cmd)']}, a['$(cmd)']=1) that hold a substitution: bash expands
// a subscript's text once more when it evaluates it, so quotes that keep
// $(cmd) from running anywhere else do not keep it from running there.
func (s *Script) index(x syntax.ArithmExpr) {
	syntax.Walk(x, func(n syntax.Node) bool {
		if w, ok := n.(*syntax.Word); ok {
			v := word(w, "")
			if v.Literal && (strings.Contains(v.Value, "$(") || strings.Contains(v.Value, "`") || strings.Contains(v.Value, "${")) {
				s.Subscripts = append(s.Subscripts, v.Value)
			}
			return false
		}
		return true
	})
}

// arithm notes the words of an arithmetic expression that hold a
// subscript with a substitution; nil is no expression.
func (s *Script) arithm(x syntax.ArithmExpr) {
	if x == nil {
		return
	}
	syntax.Walk(x, func(n syntax.Node) bool {
		if w, ok := n.(*syntax.Word); ok {
			s.subscript(word(w, ""))
			return false
		}
		return true
	})
}

// nameValues are, per builtin, its options whose value is the next word
// (or the rest of the cluster), for names to skip them.
var nameValues = map[string]string{"read": "adinNptu", "mapfile": "dnOsuCc", "readarray": "dnOsuCc"}

// names notes the operands of the builtin ws (as takesSubscripts found
// it) that bash takes for a variable name and that are known only at
// run time.
func (s *Script) names(ws []Word) {
	b := 0
	if ws[0].Value == "builtin" || ws[0].Value == "command" {
		b = 1
	}
	name, ops := ws[b].Value, ws[b+1:]
	switch name {
	case "unset", "read", "mapfile", "readarray":
		values := nameValues[name]
		for i := 0; i < len(ops); i++ {
			w := ops[i]
			switch {
			case !w.Literal:
				s.Names = append(s.Names, w.Value)
			case len(w.Value) > 1 && w.Value[0] == '-' && strings.IndexByte(values, w.Value[len(w.Value)-1]) >= 0:
				i++ // the option's value, data
			}
		}
	case "printf", "test", "[":
		for i := 0; i+1 < len(ops); i++ {
			if ops[i].Literal && ops[i].Value == "-v" && !ops[i+1].Literal {
				s.Names = append(s.Names, ops[i+1].Value)
			}
		}
	}
}

// takesSubscripts reports whether the command ws is a builtin that
// evaluates its operands' subscripts, also behind builtin or command.
func takesSubscripts(ws []Word) bool {
	for i, w := range ws {
		if !w.Literal {
			return false
		}
		if subscriptBuiltins[w.Value] {
			return true
		}
		if i > 0 || w.Value != "builtin" && w.Value != "command" {
			return false
		}
	}
	return false
}

func (s *Script) code(w Word) {
	if w.Literal && (strings.Contains(w.Value, "$(") || strings.Contains(w.Value, "`")) {
		s.Code = append(s.Code, w.Value)
	}
}

// input returns where rs point standard input; the last one wins.
func input(rs []*syntax.Redirect) *Input {
	var in *Input
	for _, r := range rs {
		if r.N != nil && r.N.Value != "0" {
			continue
		}
		switch r.Op {
		case syntax.RdrIn, syntax.RdrInOut:
			v, ok := literal(r.Word)
			in = &Input{Kind: FromFile, Value: v, Literal: ok}
		case syntax.WordHdoc:
			v, ok := literal(r.Word)
			in = &Input{Kind: FromText, Value: v, Literal: ok}
		case syntax.Hdoc, syntax.DashHdoc:
			v, ok := hereDoc(r)
			in = &Input{Kind: FromText, Value: v, Literal: ok}
		case syntax.DplIn:
			in = &Input{Kind: FromDescriptor}
		}
	}
	return in
}

// hereDoc returns a here-document's text when nothing in it expands: with
// a quoted delimiter its body is taken as written; otherwise a backslash
// escapes only $ ` \ and newline.
func hereDoc(r *syntax.Redirect) (string, bool) {
	if r.Hdoc == nil {
		return "", true
	}
	quoted := false
	for _, p := range r.Word.Parts {
		l, ok := p.(*syntax.Lit)
		if !ok || strings.Contains(l.Value, `\`) {
			quoted = true
		}
	}
	var b strings.Builder
	for _, p := range r.Hdoc.Parts {
		l, ok := p.(*syntax.Lit)
		if !ok {
			return "", false
		}
		if quoted {
			b.WriteString(l.Value)
		} else {
			b.WriteString(unescapeHereDoc(l.Value))
		}
	}
	return b.String(), true
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

func assign(a *syntax.Assign, written string) Word {
	if a.Name == nil && a.Value != nil {
		// A naked operand ('a[x]'=1, -a): the word as written, read.
		return word(a.Value, written)
	}
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

// unescapeHereDoc removes the backslashes an unquoted here-document
// removes: before $ ` \ and newline.
func unescapeHereDoc(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("$`\\\n", s[i+1]) >= 0 {
			i++
			if s[i] != '\n' {
				b.WriteByte(s[i])
			}
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
