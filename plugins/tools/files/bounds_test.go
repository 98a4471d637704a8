package files

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/services/tools"
)

// braceBomb is the pattern of issue 28: n groups nested n deep.
func braceBomb(n int) string { return strings.Repeat("{", n) + strings.Repeat("}", n) }

func TestPatternBombsAreRefusedBeforeMatching(t *testing.T) {
	ws := tree(t, map[string]string{"a/b.go": "package b\n", "c.txt": "x\n"})
	for _, c := range []struct {
		pattern string
		want    string
	}{
		{braceBomb(2000), "bytes, over the limit of 512"},
		{braceBomb(200), "groups, over the limit of 8"},
		{"{a,{b,{c,{d,e}}}}", "4 deep, over the limit of 3"},
		{strings.Repeat("{a,b}", 9), "9 {…} groups, over the limit of 8"},
		{strings.Repeat("x", 513), "513 bytes, over the limit of 512"},
	} {
		// Straight to the tool: the schema's maxLength is the first line,
		// the tool does not rely on it.
		r := run(t, Config{}, "glob", ws, m{"pattern": c.pattern})
		if !r.IsError || !strings.Contains(r.Content, c.want) {
			t.Errorf("glob %.40q…: want an error saying %q, got %.300q", c.pattern, c.want, r.Content)
		}
		if len(r.Content) > 600 {
			t.Errorf("glob %.40q…: the error repeats the pattern at length (%d bytes)", c.pattern, len(r.Content))
		}
		r = run(t, Config{}, "grep", ws, m{"pattern": "x", "glob": c.pattern})
		if !r.IsError || !strings.Contains(r.Content, c.want) {
			t.Errorf("grep glob %.40q…: want an error saying %q, got %.300q", c.pattern, c.want, r.Content)
		}
	}
	// Within the bounds braces still work, escaped ones do not count.
	if got := ok(t, Config{}, "glob", ws, m{"pattern": "{a/*.{go,rs},c.{txt,md}}"}); got != "a/b.go\nc.txt\n" {
		t.Fatalf("glob within bounds = %q", got)
	}
	if msg := checkBounds(strings.Repeat(`\{`, 20)); msg != "" {
		t.Fatalf("escaped braces counted: %s", msg)
	}
	for _, name := range []string{"glob", "grep"} {
		for _, tl := range (Config{}).withDefaults().build() {
			if tl.Name == name && !strings.Contains(string(tl.Parameters), `"maxLength":512`) {
				t.Errorf("%s: the schema does not state the pattern bound: %s", name, tl.Parameters)
			}
		}
	}
}

// BenchmarkWorstPatternWithinBounds is the costliest glob the bounds let
// through, matched against one deep path: what a model can make one
// match cost.
func BenchmarkWorstPatternWithinBounds(b *testing.B) {
	alts := func(depth int) string {
		s := "*a*"
		for range depth {
			s = "{" + s + ",*" + s + "*}"
		}
		return s
	}
	p := alts(3) + "/**/" + alts(0) + "{*,**/*}" + strings.Repeat("*a", 100)
	for len(p) > MaxPatternBytes {
		p = p[:len(p)-1]
	}
	if msg := checkPattern(p); msg != "" {
		b.Fatalf("%q: %s", p, msg)
	}
	ws := tree(b, map[string]string{strings.Repeat("aaaaaaaa/", 20) + "b": ""})
	b.ResetTimer()
	for range b.N {
		c := Config{}.withDefaults()
		raw, _ := json.Marshal(m{"pattern": p})
		c.glob(b.Context(), tools.Call{Name: "glob", Arguments: raw, Workspace: ws})
	}
}
