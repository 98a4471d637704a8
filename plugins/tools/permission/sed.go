package permission

import (
	"strings"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
)

// sedScripts returns the scripts of a sed command: the values of -e and
// --expression, or, without them, its first operand. A script known only
// at run time is returned as "e", which runs a command.
func sedScripts(ws []shell.Word) []string {
	var out []string
	var first string
	haveFirst, given := false, false
	for i := 1; i < len(ws); i++ {
		w := ws[i]
		v := w.Value
		switch {
		case !w.Literal:
			if !haveFirst && !given {
				out = append(out, "e")
			}
			haveFirst = true
		case v == "--":
			if i+1 < len(ws) && !haveFirst {
				first, haveFirst = ws[i+1].Value, true
			}
			i = len(ws)
		case strings.HasPrefix(v, "--expression="):
			out, given = append(out, strings.TrimPrefix(v, "--expression=")), true
		case v == "--expression" || v == "--file" || v == "--line-length":
			if v == "--expression" && i+1 < len(ws) {
				out, given = append(out, ws[i+1].Value), true
			}
			given = given || v == "--file"
			i++
		case strings.HasPrefix(v, "--"):
		case len(v) > 1 && v[0] == '-':
			// A cluster: e and f take the rest of it or the next word, l a
			// number.
			for k := 1; k < len(v); k++ {
				c := v[k]
				if c == 'i' {
					break // -i takes the rest as a backup suffix (-i.bak)
				}
				if c != 'e' && c != 'f' && c != 'l' {
					continue
				}
				val := v[k+1:]
				if val == "" && i+1 < len(ws) {
					i++
					val = ws[i].Value
				}
				if c == 'e' {
					out = append(out, val)
				}
				given = given || c != 'l'
				break
			}
		case !haveFirst:
			first, haveFirst = v, true
		}
	}
	if !given && haveFirst {
		out = append(out, first)
	}
	return out
}

// sedRuns reports whether a sed script may run a command: GNU sed's e
// command, or an s command with the e flag. What cannot be read counts
// as running one.
func sedRuns(s string) bool {
	runs, _ := sedScan(s)
	return runs
}

// sedScan reads a sed script for what sedRuns and ReadOnlyCommand need:
// whether it may run a command, and whether it writes a file (the w and W
// commands, the w flag of s). A script that runs a command is reported as
// soon as that is known; writes may then be incomplete.
func sedScan(s string) (runs, writes bool) {
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '{' || c == '}' || c == '!' || c == ',' ||
			c == '~' || c == '+' || c == '$' || (c >= '0' && c <= '9'):
			i++
		case c == '/' || c == '\\':
			// An address: /re/ or \cREc.
			d := c
			if c == '\\' {
				if i+1 >= len(s) {
					return true, writes
				}
				i++
				d = s[i]
			}
			end, ok := sedDelimited(s, i+1, d)
			if !ok {
				return true, writes
			}
			i = end
			for i < len(s) && (s[i] == 'I' || s[i] == 'M') {
				i++
			}
		case c == 'e':
			return true, writes
		case c == 's' || c == 'y':
			if i+1 >= len(s) {
				return true, writes
			}
			d := s[i+1]
			end, ok := sedDelimited(s, i+2, d)
			if !ok {
				return true, writes
			}
			if end, ok = sedDelimited(s, end, d); !ok {
				return true, writes
			}
			i = end
			for i < len(s) && s[i] != ';' && s[i] != '\n' && s[i] != '}' {
				if c == 's' && s[i] == 'e' {
					return true, writes
				}
				if s[i] == 'w' {
					writes = true
					i = sedLineEnd(s, i)
					break
				}
				i++
			}
		case c == 'a' || c == 'i' || c == 'c' || c == 'r' || c == 'R' || c == 'w' || c == 'W' || c == ':' ||
			c == 'b' || c == 't' || c == 'T' || c == 'v' || c == 'l' || c == 'q' || c == 'Q' || c == 'L':
			// Text, a file name or a label: read to the next ; even where
			// GNU sed reads to the end of the line, so that what follows
			// is scanned too (a false e there only fails closed).
			writes = writes || c == 'w' || c == 'W'
			i = sedLineEnd(s, i)
		default:
			i++ // a command of one letter (p, d, n, h, g, x, =, ...)
		}
	}
	return false, writes
}

// sedDelimited returns the index after the delimiter d that ends the part
// starting at i, a backslash escaping any character.
func sedDelimited(s string, i int, d byte) (int, bool) {
	for ; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case d:
			return i + 1, true
		}
	}
	return i, false
}

func sedLineEnd(s string, i int) int {
	if j := strings.IndexAny(s[i:], ";\n"); j >= 0 {
		return i + j + 1
	}
	return len(s)
}
