package permission

import (
	"encoding/json"
	"fmt"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
	"github.com/dsh-go/dsh/services/tools"
)

// rule is a compiled Rule.
type rule struct {
	where     string           // "rules[2]", "deny", "allow": for reasons and Source
	tool      *regexp.Regexp   // nil = every tool
	toolNot   []*regexp.Regexp // tools the rule never matches
	command   []*regexp.Regexp // nil = every command
	anyRest   bool             // the pattern ends in a lone *
	pattern   string           // the command pattern as written
	words     []string         // its words as written
	progSlash bool             // the pattern's program has a slash: no base-name match
	path      string           // doublestar; "" = every call
	decision  tools.Decision
	reason    string
}

// globRegexp compiles a glob over one word: * any run of characters
// (slashes included, so `cat /etc/*` means what it says), ? one character,
// [...] a class ([!...] negated), \x the character x.
func globRegexp(g string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString(`^`)
	for i := 0; i < len(g); i++ {
		switch c := g[i]; c {
		case '*':
			b.WriteString(`.*`)
		case '?':
			b.WriteString(`.`)
		case '\\':
			if i+1 == len(g) {
				return nil, fmt.Errorf("it ends with a lone backslash")
			}
			i++
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		case '[':
			end := strings.IndexByte(g[i+1:], ']')
			if end < 0 {
				return nil, fmt.Errorf("the [ at byte %d is never closed", i)
			}
			class := g[i+1 : i+1+end]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			if class == "" || class == "^" {
				return nil, fmt.Errorf("the class at byte %d is empty", i)
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += end + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString(`$`)
	return regexp.Compile(b.String())
}

// compileCommand compiles a command pattern word by word.
func compileCommand(p string) ([]*regexp.Regexp, error) {
	fields := strings.Fields(p)
	if len(fields) == 0 {
		return nil, fmt.Errorf("the pattern is blank")
	}
	out := make([]*regexp.Regexp, len(fields))
	for i, f := range fields {
		re, err := globRegexp(f)
		if err != nil {
			return nil, fmt.Errorf("word %d %q: %v", i+1, f, err)
		}
		out[i] = re
	}
	return out, nil
}

func (r *rule) matchesTool(name string) bool {
	for _, re := range r.toolNot {
		if re.MatchString(name) {
			return false
		}
	}
	return r.tool == nil || r.tool.MatchString(name)
}

// matchesAnyCommand reports whether the rule takes every bash command,
// even one that cannot be read before it runs.
func (r *rule) matchesAnyCommand() bool {
	return r.command == nil || (len(r.command) == 1 && r.anyRest)
}

// matchesCommand reports whether c surely matches the rule's command
// pattern, whatever its words expand to at run time: a word known only at
// run time matches only a * of the pattern, and one that may become
// several words ($X unquoted, "$@") only the pattern's last *.
func (r *rule) matchesCommand(c shell.Command) bool {
	return r.command == nil || r.matchWords(c.Words, false)
}

// mayMatchCommand reports whether c could match the rule's command pattern
// once it runs: a word known only at run time could be any word, or
// several, or none; a glob could be any name it matches.
func (r *rule) mayMatchCommand(c shell.Command) bool {
	return r.command == nil || r.matchWords(c.Words, true)
}

// pats returns the pattern's words, the last * left out when it stands
// for any further words.
func (r *rule) pats() []*regexp.Regexp {
	if r.anyRest {
		return r.command[:len(r.command)-1]
	}
	return r.command
}

// matchWords matches ws against the pattern: surely (may false) or
// possibly (may true). Commands of known words, the common case, take the
// straight path; the others a walk over the pattern positions each word
// may reach.
func (r *rule) matchWords(ws []shell.Word, may bool) bool {
	pats := r.pats()
	if exact(ws) {
		if len(ws) < len(pats) || len(ws) > len(pats) && !r.anyRest {
			return false
		}
		for j, re := range pats {
			if !r.matchWord(j, re, ws[j].Value) {
				return false
			}
		}
		return true
	}
	if len(pats) >= 64 {
		return may // Validate refuses such patterns; fail towards the restrictive side
	}
	end := uint64(1) << len(pats)
	reach := uint64(1) // bit j: the words so far may have used the first j pattern words
	for _, w := range ws {
		var next uint64
		for j := 0; j <= len(pats); j++ {
			if reach&(1<<j) == 0 {
				continue
			}
			if j == len(pats) {
				if r.anyRest {
					next |= end // the last * takes any word
				} else if may && (w.Split || w.Glob) {
					next |= end // it may be no word at all
				}
				continue
			}
			next |= r.step(j, pats, w, may)
		}
		reach = next
		if reach == 0 {
			return false
		}
	}
	return reach&end != 0
}

// step returns the pattern positions word w may take the match to from
// position j.
func (r *rule) step(j int, pats []*regexp.Regexp, w shell.Word, may bool) uint64 {
	re := pats[j]
	switch {
	case w.Exact():
		if r.matchWord(j, re, w.Value) {
			return 1 << (j + 1)
		}
		return 0
	case !may:
		// Surely: a glob argument is matched as written, as it always was;
		// a glob program or an unknown word only by *; a word that may
		// split never before the last *.
		if w.Split {
			return 0
		}
		if w.Glob && j > 0 && re.MatchString(w.Value) || isStar(re) {
			return 1 << (j + 1)
		}
		return 0
	case w.Glob:
		// None, or as many file names as the glob matches.
		out := uint64(1) << j
		for k := j; k < len(pats) && r.globMayMatch(k, pats[k], w); k++ {
			out |= 1 << (k + 1)
		}
		return out
	case w.Split:
		out := uint64(0)
		for k := j; k <= len(pats); k++ {
			out |= 1 << k
		}
		return out
	}
	return 1 << (j + 1) // one word, any value
}

// matchWord matches one known word against pattern word j: the program
// (j 0) also by its base name, unless the pattern's program has a slash.
func (r *rule) matchWord(j int, re *regexp.Regexp, v string) bool {
	return re.MatchString(v) || j == 0 && !r.progSlash && re.MatchString(path.Base(v))
}

// globMayMatch reports whether glob word w could expand to a name that
// pattern word j matches. When the pattern word is itself a glob, two
// globs are taken to meet: only the restrictive rules ask this.
func (r *rule) globMayMatch(j int, re *regexp.Regexp, w shell.Word) bool {
	if r.matchWord(j, re, w.Value) {
		return true
	}
	word := r.words[j]
	if strings.ContainsAny(word, "*?[") {
		return true
	}
	lit := unescapeGlob(word)
	g, err := globRegexp(w.Pattern)
	if err != nil {
		return true
	}
	if g.MatchString(lit) {
		return true
	}
	if j == 0 && !r.progSlash {
		if b, err := globRegexp(path.Base(w.Pattern)); err != nil || b.MatchString(lit) {
			return true
		}
	}
	return false
}

func isStar(re *regexp.Regexp) bool { return re.String() == `^.*$` }

func exact(ws []shell.Word) bool {
	for _, w := range ws {
		if !w.Exact() {
			return false
		}
	}
	return true
}

// unescapeGlob returns the characters a glob without wildcards matches.
func unescapeGlob(g string) string {
	if !strings.Contains(g, `\`) {
		return g
	}
	var b strings.Builder
	for i := 0; i < len(g); i++ {
		if g[i] == '\\' && i+1 < len(g) {
			i++
		}
		b.WriteByte(g[i])
	}
	return b.String()
}

// pathKeys are the argument names read as paths, on every tool.
var pathKeys = []string{"path", "file_path", "dir", "directory"}

// pathArgs returns the paths a call names: its string arguments named in
// pathKeys and the strings of an array argument named paths.
func pathArgs(raw json.RawMessage) []string {
	var args map[string]json.RawMessage
	if json.Unmarshal(raw, &args) != nil {
		return nil
	}
	var out []string
	for _, k := range pathKeys {
		var s string
		if v, ok := args[k]; ok && json.Unmarshal(v, &s) == nil && s != "" {
			out = append(out, s)
		}
	}
	var many []string
	if v, ok := args["paths"]; ok && json.Unmarshal(v, &many) == nil {
		for _, s := range many {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// matchesPaths reports whether the call's paths match the rule's pattern.
// A rule that allows needs every path to match; one that denies or asks,
// any of them, so a call cannot slip a denied path in beside an allowed one.
// A call without a path argument does not match a rule with a path.
func (r *rule) matchesPaths(paths []string, workspace string) bool {
	if r.path == "" {
		return true
	}
	if len(paths) == 0 {
		return false
	}
	for _, p := range paths {
		m := matchPath(r.path, p, workspace)
		if r.decision == tools.Allow && !m {
			return false
		}
		if r.decision != tools.Allow && m {
			return true
		}
	}
	return r.decision == tools.Allow
}

// matchPath matches p, as the tool would resolve it from workspace,
// against pattern: an absolute pattern against the absolute path, a
// relative one against the path relative to the workspace, which a path
// outside the workspace never matches. Symbolic links are not followed:
// the tools refuse links that leave the workspace themselves.
func matchPath(pattern, p, workspace string) bool {
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(workspace, p)
	}
	abs = filepath.Clean(abs)
	subject := abs
	if !filepath.IsAbs(pattern) {
		if workspace == "" {
			subject = filepath.Clean(p)
		} else {
			rel, err := filepath.Rel(filepath.Clean(workspace), abs)
			if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
				return false
			}
			subject = rel
		}
	}
	ok, err := doublestar.Match(pattern, filepath.ToSlash(subject))
	return err == nil && ok
}

// inside reports whether p, resolved from workspace, stays inside it.
func inside(p, workspace string) bool {
	if workspace == "" {
		return false
	}
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(workspace, p)
	}
	rel, err := filepath.Rel(filepath.Clean(workspace), filepath.Clean(abs))
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
