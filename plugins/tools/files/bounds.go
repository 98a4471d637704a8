package files

import (
	"fmt"
)

// Bounds of a glob pattern (glob's pattern, grep's glob filter). Matching
// with nested or many brace groups backtracks through every combination of
// their alternatives: {a,{b,{c,…}}} N deep cost time cubic in N (N=10,000
// took minutes). Patterns people write stay far below these.
const (
	// MaxPatternBytes is the longest pattern accepted.
	MaxPatternBytes = 512
	// MaxBraceGroups is how many {…} groups one pattern may hold.
	MaxBraceGroups = 8
	// MaxBraceDepth is how deep {…} groups may nest.
	MaxBraceDepth = 3
)

// patternBounds is the schema text stating the bounds, shared by the
// schemas that take a glob pattern.
var patternBounds = fmt.Sprintf("at most %d bytes and %d {…} groups, nested at most %d deep", MaxPatternBytes, MaxBraceGroups, MaxBraceDepth)

// checkBounds says why pattern is over a bound, or "".
func checkBounds(pattern string) string {
	if len(pattern) > MaxPatternBytes {
		return fmt.Sprintf("is %d bytes, over the limit of %d; shorten it or search in a narrower path", len(pattern), MaxPatternBytes)
	}
	groups, depth, deepest := 0, 0, 0
	for i := 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			i++ // an escaped brace is a literal
		case '{':
			groups++
			depth++
			deepest = max(deepest, depth)
		case '}':
			if depth > 0 {
				depth--
			}
		}
	}
	switch {
	case groups > MaxBraceGroups:
		return fmt.Sprintf("has %d {…} groups, over the limit of %d; split the search into several calls", groups, MaxBraceGroups)
	case deepest > MaxBraceDepth:
		return fmt.Sprintf("nests {…} groups %d deep, over the limit of %d; flatten the alternatives", deepest, MaxBraceDepth)
	}
	return ""
}
