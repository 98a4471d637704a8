package permission

import (
	"path"
	"regexp"
	"strings"

	"github.com/dsh-go/dsh/plugins/tools/permission/shell"
)

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
