package files

import (
	"strings"
	"testing"
)

// TestLongPathsAreCutInErrors: an error result names a path once and cut,
// whatever its length, so a 100,000-character argument cannot fill the
// model's context.
func TestLongPathsAreCutInErrors(t *testing.T) {
	ws := tree(t, map[string]string{"a.txt": "x\n"})
	long := strings.Repeat("p", 100000)
	for _, c := range []struct {
		tool string
		args m
	}{
		{"read", m{"path": long}},
		{"read", m{"path": "../" + long}},
		{"read", m{"path": "/" + long}},
		{"write", m{"path": long + "/x", "content": "x"}},
		{"edit", m{"path": long, "old": "a", "new": "b"}},
		{"list", m{"path": long}},
		{"glob", m{"pattern": "*", "path": long}},
		{"grep", m{"pattern": "x", "path": long}},
		{"grep", m{"pattern": "(" + long}},
		{"glob", m{"pattern": long}},
	} {
		r := run(t, Config{}, c.tool, ws, c.args)
		if !r.IsError || len(r.Content) > 1200 {
			t.Errorf("%s: want a short error, got %d bytes: %.200q…", c.tool, len(r.Content), r.Content)
		}
	}
}
