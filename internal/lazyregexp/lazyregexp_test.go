package lazyregexp

import (
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestCompiledOnFirstUseOnly checks what the package is for: New does not
// compile (outside tests), the first use does, and every use after it gets
// the same compiled expression, concurrently too.
func TestCompiledOnFirstUseOnly(t *testing.T) {
	inTest = false
	t.Cleanup(func() { inTest = true })
	var compiles atomic.Int32
	compile = func(expr string) *regexp.Regexp {
		compiles.Add(1)
		return regexp.MustCompile(expr)
	}
	t.Cleanup(func() { compile = regexp.MustCompile })
	r := New(`^[a-z]{1,64}$`)
	if compiles.Load() != 0 || r.String() != `^[a-z]{1,64}$` {
		t.Fatalf("declaring compiled %d times (String %q); want 0", compiles.Load(), r.String())
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if !r.MatchString("abc") || r.MatchString("ABC") {
				t.Error("MatchString answered wrong")
			}
		})
	}
	wg.Wait()
	if compiles.Load() != 1 {
		t.Fatalf("compiled %d times; want once", compiles.Load())
	}
	if first := r.Regexp(); r.Regexp() != first {
		t.Fatal("Regexp returned two different compiled expressions")
	}
}

// TestNewIsLazyOutsideTests checks that New itself leaves the compiling to
// the first use when not under go test: the allocations of a {1,64}
// repetition's compile are what issue 38 took out of every start.
func TestNewIsLazyOutsideTests(t *testing.T) {
	inTest = false
	t.Cleanup(func() { inTest = true })
	const expr = `^[a-zA-Z0-9_-]{1,64}$`
	declare := testing.AllocsPerRun(20, func() { _ = New(expr) })
	compile := testing.AllocsPerRun(20, func() { _ = regexp.MustCompile(expr) })
	if declare > 5 || compile < 100 {
		t.Fatalf("New took %.0f allocations, compiling %.0f; want New to take a handful and leave the compile for later", declare, compile)
	}
}

// TestABadPatternFailsUnderTest checks the other half: under go test, New
// compiles at once, so a bad pattern fails its package's tests where it
// is declared.
func TestABadPatternFailsUnderTest(t *testing.T) {
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "missing closing )") {
			t.Fatalf("New of a bad pattern under test recovered %v; want regexp's panic", p)
		}
	}()
	New(`(`)
}

// TestTheMethodsAreRegexps checks each delegating method against the
// regexp package's answer.
func TestTheMethodsAreRegexps(t *testing.T) {
	r := New(`a(b+)`)
	if got := r.FindStringIndex("xabbc"); len(got) != 2 || got[0] != 1 || got[1] != 4 {
		t.Errorf("FindStringIndex = %v", got)
	}
	if got := r.FindStringSubmatch("xabbc"); len(got) != 2 || got[1] != "bb" {
		t.Errorf("FindStringSubmatch = %q", got)
	}
	if got := r.FindSubmatch([]byte("ab")); len(got) != 2 || string(got[1]) != "b" {
		t.Errorf("FindSubmatch = %q", got)
	}
	if got := r.ReplaceAllString("ab abb", "<$1>"); got != "<b> <bb>" {
		t.Errorf("ReplaceAllString = %q", got)
	}
	if got := r.ReplaceAllStringFunc("ab x", strings.ToUpper); got != "AB x" {
		t.Errorf("ReplaceAllStringFunc = %q", got)
	}
}
