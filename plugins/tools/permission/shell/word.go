package shell

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// maxBraceWords bounds the words one brace expansion is read as: past it
// the word counts as unknown, so {1..99999999} costs nothing to judge.
const maxBraceWords = 64

// maxBraces and maxBraceWordLen bound the words brace expansion is tried
// on: SplitBraces is superlinear in nested braces (a 40 KiB word of {
// then } took half a minute), so a word past either bound is read as
// unknown before it is split, and the strictest rule it could meet holds.
const (
	maxBraces       = 64
	maxBraceWordLen = 4096
)

// appendWords appends to ws the words w stands for once the shell has
// expanded its braces ({rm,-f,x} is three words), each read as word reads
// it.
func appendWords(ws []Word, w *syntax.Word, written string) []Word {
	if !hasBrace(w) {
		return append(ws, word(w, written))
	}
	return appendBraces(ws, w, written)
}

// appendBraces is appendWords for a word that may hold braces, apart so
// that its copy of the word is made only then.
func appendBraces(ws []Word, w *syntax.Word, written string) []Word {
	if len(written) > maxBraceWordLen || braces(w) > maxBraces {
		return append(ws, Word{Value: written, Split: true})
	}
	cp := *w // SplitBraces replaces the parts of the word it is given
	if !syntax.SplitBraces(&cp) {
		return append(ws, word(w, written))
	}
	n := len(ws)
	for x, err := range expand.BracesSeq(nil, &cp) {
		if err != nil || len(ws)-n == maxBraceWords {
			return append(ws[:n], Word{Value: written, Split: true})
		}
		if !emptyUnquoted(x) {
			ws = append(ws, word(x, written))
		}
	}
	return ws
}

// emptyUnquoted reports whether w is an unquoted empty word, which bash
// drops ({a,} is just a).
func emptyUnquoted(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); !ok || l.Value != "" {
			return false
		}
	}
	return true
}

// braces counts the opening braces of w's unquoted literal parts.
func braces(w *syntax.Word) int {
	n := 0
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			n += strings.Count(l.Value, "{")
		}
	}
	return n
}

func hasBrace(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.IndexByte(l.Value, '{') >= 0 {
			return true
		}
	}
	return false
}

// word reads w: its value after quote removal when nothing in it expands
// at run time, whether it is a glob, and whether splitting may turn it
// into no word or several.
func word(w *syntax.Word, written string) Word {
	if len(w.Parts) == 1 {
		// The common words, git or 'a b', need no copy.
		switch p := w.Parts[0].(type) {
		case *syntax.Lit:
			if !strings.ContainsAny(p.Value, `\*?[`) {
				return Word{Value: p.Value, Literal: true}
			}
		case *syntax.SglQuoted:
			if !p.Dollar {
				return Word{Value: p.Value, Literal: true}
			}
		}
	}
	var val, pat strings.Builder
	out := Word{Literal: true}
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			unquotedLit(p.Value, &val, &pat, &out.Glob)
		case *syntax.SglQuoted:
			v := p.Value
			if p.Dollar {
				v = ansiC(v)
			}
			val.WriteString(v)
			escapeGlob(&pat, v)
		case *syntax.DblQuoted:
			if p.Dollar {
				out.Literal = false // $"..." is translated at run time
			}
			for _, q := range p.Parts {
				l, ok := q.(*syntax.Lit)
				if !ok {
					out.Literal = false
					if manyInQuotes(q) {
						out.Split = true
					}
					continue
				}
				v := unescape(l.Value, true)
				val.WriteString(v)
				escapeGlob(&pat, v)
			}
		case *syntax.ExtGlob:
			// @(a|b), +(...): a pattern the shell matches against file
			// names; read as "anything" to stay on the safe side.
			out.Glob = true
			val.WriteString(p.Op.String() + p.Pattern.Value + ")")
			pat.WriteString("*")
		default:
			// $x, ${x}, $(...), `...`, $((...)), <(...) outside quotes:
			// the result is split on IFS and globbed.
			out.Literal, out.Split = false, true
		}
	}
	if !out.Literal {
		out.Glob = false
		out.Value = written
		return out
	}
	out.Value = val.String()
	if out.Glob {
		out.Pattern = pat.String()
	}
	return out
}

// manyInQuotes reports whether p, inside double quotes, may still become
// several words: "$@", "${a[@]}", "${!prefix@}".
func manyInQuotes(p syntax.WordPart) bool {
	pe, ok := p.(*syntax.ParamExp)
	if !ok {
		return false
	}
	return pe.Param != nil && pe.Param.Value == "@" || pe.Index != nil || pe.Names != 0
}

// unquotedLit adds an unquoted literal to val (backslashes removed) and
// to pat (the glob, with escaped characters escaped), noting in glob
// whether an unquoted *, ? or [ appeared.
func unquotedLit(s string, val, pat *strings.Builder, glob *bool) {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s):
			i++
			if s[i] == '\n' {
				continue // a line continuation
			}
			val.WriteByte(s[i])
			escapeGlob(pat, s[i:i+1])
		case c == '*' || c == '?' || c == '[' || c == ']':
			*glob = *glob || c != ']'
			val.WriteByte(c)
			pat.WriteByte(c)
		default:
			val.WriteByte(c)
			escapeGlob(pat, s[i:i+1])
		}
	}
}

// escapeGlob adds s to a glob pattern as plain characters.
func escapeGlob(pat *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			pat.WriteByte('\\')
		}
		pat.WriteByte(s[i])
	}
}

// literal returns w's value after quote removal when nothing in it expands
// at run time (globs included: a redirection target is not globbed into
// several words).
func literal(w *syntax.Word) (string, bool) {
	if w == nil {
		return "", false
	}
	x := word(w, "")
	return x.Value, x.Literal
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

// ansiC decodes the body of $'...' as bash does: \n, \t, \xHH, \NNN
// (octal), \uHHHH, \UHHHHHHHH, \cX and the rest; the string ends at the
// first NUL, as it does when bash passes it to a program.
func ansiC(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'e', 'E':
			b.WriteByte(0x1b)
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case '\\', '\'', '"', '?':
			b.WriteByte(c)
		case 'c':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i] & 0x1f)
			} else {
				b.WriteString(`\c`)
			}
		case 'x', 'u', 'U':
			limit := 2
			if c == 'u' {
				limit = 4
			} else if c == 'U' {
				limit = 8
			}
			j := i + 1
			for j < len(s) && j-i-1 < limit && isHex(s[j]) {
				j++
			}
			if j == i+1 {
				b.WriteByte('\\')
				b.WriteByte(c)
				continue
			}
			n, _ := strconv.ParseUint(s[i+1:j], 16, 32)
			switch {
			case c == 'x':
				b.WriteByte(byte(n))
			case n <= utf8.MaxRune && utf8.ValidRune(rune(n)):
				b.WriteRune(rune(n))
			default:
				// Not a character: kept as written, so it never reads as
				// a name an allow rule knows.
				b.WriteString(s[i-1 : j])
			}
			i = j - 1
		case '0', '1', '2', '3', '4', '5', '6', '7':
			j := i
			for j < len(s) && j-i < 3 && s[j] >= '0' && s[j] <= '7' {
				j++
			}
			n, _ := strconv.ParseUint(s[i:j], 8, 16)
			b.WriteByte(byte(n))
			i = j - 1
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	out, _, _ := strings.Cut(b.String(), "\x00")
	return out
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}
