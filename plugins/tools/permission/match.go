package permission

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
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
