package files

import (
	"path"
	"regexp"
	"strings"
)

// A small .gitignore matcher. The one Go library for it (sabhiram/
// go-gitignore) has not changed since 2021 and go-git's comes with all of
// go-git, so the rules glob and grep need are here, tested in
// ignore_test.go. Supported, as git documents them: blank lines and
// comments, "\#" and "\!", trailing spaces (unless escaped), "!" to
// re-include, a trailing "/" for folders only, a slash at the start or in
// the middle anchoring the pattern to the .gitignore's folder, "*", "?",
// "[...]" classes (with "!" or "^" to negate), and "**" as a whole
// component (leading, trailing, middle). Deeper .gitignore files win over
// shallower ones, later lines over earlier. Not read: .git/info/exclude and
// the user's global excludes file.

// ignoreRule is one pattern line.
type ignoreRule struct {
	re       *regexp.Regexp
	negate   bool
	dirOnly  bool
	anchored bool // matched against the whole relative path, not the name
}

// ignoreFile is the rules of one .gitignore and the folder it is in
// (workspace-relative, "." for the workspace).
type ignoreFile struct {
	base  string
	rules []ignoreRule
}

// parseIgnore reads a .gitignore's text; lines it cannot turn into a
// pattern are skipped, as git does.
func parseIgnore(base string, data []byte) *ignoreFile {
	f := &ignoreFile{base: base}
	for _, line := range strings.Split(string(data), "\n") {
		if r, ok := parseRule(strings.TrimSuffix(line, "\r")); ok {
			f.rules = append(f.rules, r)
		}
	}
	return f
}

func parseRule(line string) (ignoreRule, bool) {
	// Trailing spaces go unless the last is escaped.
	for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, `\ `) {
		line = line[:len(line)-1]
	}
	if line == "" || line[0] == '#' {
		return ignoreRule{}, false
	}
	var r ignoreRule
	if line[0] == '!' {
		r.negate, line = true, line[1:]
	} else if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
		line = line[1:]
	}
	if strings.HasSuffix(line, "/") {
		r.dirOnly, line = true, strings.TrimRight(line, "/")
	}
	if line == "" {
		return ignoreRule{}, false
	}
	r.anchored = strings.Contains(line, "/")
	line = strings.TrimPrefix(line, "/")
	re, err := regexp.Compile(globRegexp(line))
	if err != nil {
		return ignoreRule{}, false
	}
	r.re = re
	return r, true
}

// globRegexp translates a gitignore glob into an anchored regular
// expression over slash-separated paths.
func globRegexp(p string) string {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '*' && i+1 < len(p) && p[i+1] == '*' && (i == 0 || p[i-1] == '/') && (i+2 == len(p) || p[i+2] == '/'):
			if i+2 == len(p) {
				b.WriteString(".*")
				i++
			} else {
				b.WriteString("(?:.*/)?")
				i += 2
			}
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '\\' && i+1 < len(p):
			i++
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		case c == '[':
			if class, n := bracket(p[i:]); n > 0 {
				b.WriteString(class)
				i += n - 1
			} else {
				b.WriteString(`\[`)
			}
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	return b.String()
}

// bracket translates the class at the start of p ("[...]") and returns it
// with the bytes it used, or 0 when p holds no closed class.
func bracket(p string) (string, int) {
	i := 1
	neg := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		neg, i = true, i+1
	}
	var b strings.Builder
	for first := true; i < len(p); i, first = i+1, false {
		c := p[i]
		if c == ']' && !first {
			if neg {
				return "[^/" + b.String() + "]", i + 1
			}
			return "[" + b.String() + "]", i + 1
		}
		if c == '\\' && i+1 < len(p) {
			i++
			c = p[i]
		}
		if strings.IndexByte(`\[]^`, c) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return "", 0
}

// ignored reports whether rel (workspace-relative) is ignored by the
// .gitignore files of stack, its ancestors' from the shallowest.
func ignored(stack []*ignoreFile, rel string, isDir bool) bool {
	out := false
	name := path.Base(rel)
	for _, f := range stack {
		sub := rel
		if f.base != "." {
			sub = strings.TrimPrefix(rel, f.base+"/")
		}
		for _, r := range f.rules {
			if r.dirOnly && !isDir {
				continue
			}
			target := name
			if r.anchored {
				target = sub
			}
			if r.re.MatchString(target) {
				out = !r.negate
			}
		}
	}
	return out
}
