// Package lazyregexp is a regexp compiled on its first use rather than at
// package initialisation.
//
// Every package initializer of every linked package runs before main, on
// every start of every dsh command, whether or not the command ever
// matches the expression: a bounded repetition such as {1,64} alone costs
// about 900 allocations to compile. A package-level Regexp of this package
// costs one small allocation instead, and archtest refuses a package-level
// regexp.MustCompile outside tests.
//
// Under `go test` the expression is compiled when it is declared, so that a
// bad pattern fails the package's tests instead of the first caller.
package lazyregexp

import (
	"os"
	"regexp"
	"strings"
	"sync"
)

// Regexp is a regexp.Regexp compiled on first use; it is safe for
// concurrent use, as regexp.Regexp is.
type Regexp struct {
	expr string
	re   func() *regexp.Regexp
}

// inTest is whether this is a test binary: go test names them *.test.
var inTest = strings.HasSuffix(os.Args[0], ".test")

// compile is regexp.MustCompile; tests count its calls.
var compile = regexp.MustCompile

// New returns a Regexp of expr, which must compile (it panics on first use
// otherwise, as regexp.MustCompile would at initialisation).
func New(expr string) *Regexp {
	r := &Regexp{expr: expr, re: sync.OnceValue(func() *regexp.Regexp { return compile(expr) })}
	if inTest {
		r.re()
	}
	return r
}

// Regexp returns the compiled expression, compiling it if nothing has yet.
func (r *Regexp) Regexp() *regexp.Regexp { return r.re() }

// String returns the source text of the expression, without compiling it.
func (r *Regexp) String() string { return r.expr }

// MatchString is regexp.Regexp.MatchString.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// FindStringIndex is regexp.Regexp.FindStringIndex.
func (r *Regexp) FindStringIndex(s string) []int { return r.re().FindStringIndex(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// FindSubmatch is regexp.Regexp.FindSubmatch.
func (r *Regexp) FindSubmatch(b []byte) [][]byte { return r.re().FindSubmatch(b) }

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.re().ReplaceAllString(src, repl)
}

// ReplaceAllStringFunc is regexp.Regexp.ReplaceAllStringFunc.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.re().ReplaceAllStringFunc(src, repl)
}
