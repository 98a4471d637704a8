package files

import (
	"fmt"
	"strings"
)

// diffContext is the unchanged lines shown around a change.
const diffContext = 3

// lcsCells bounds the table of the line diff; a larger changed region is
// shown as all its old lines removed and all its new lines added.
const lcsCells = 250_000

type opKind byte

const (
	opEqual opKind = ' '
	opDel   opKind = '-'
	opAdd   opKind = '+'
)

type op struct {
	kind opKind
	text string
	a, b int // 1-based line numbers in old and new (of the side it has)
}

// unified renders a unified-style diff of before and after, named name,
// with diffContext lines of context, at most maxLines lines of hunks and
// lines cut at lineMax bytes. Equal texts give "".
func unified(name, before, after string, maxLines, lineMax int) string {
	if strings.HasSuffix(before, "\n") && strings.HasSuffix(after, "\n") {
		before, after = before[:len(before)-1], after[:len(after)-1]
	}
	a, b := strings.Split(before, "\n"), strings.Split(after, "\n")
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	if pre == len(a) && pre == len(b) {
		return ""
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	// Only the changed middle and the context around it become ops.
	from := max(0, pre-diffContext)
	var ops []op
	for i := from; i < pre; i++ {
		ops = append(ops, op{opEqual, a[i], i + 1, i + 1})
	}
	ops = append(ops, middle(a[pre:len(a)-suf], b[pre:len(b)-suf], pre+1, pre+1)...)
	for k := 0; k < min(suf, diffContext); k++ {
		i, j := len(a)-suf+k, len(b)-suf+k
		ops = append(ops, op{opEqual, a[i], i + 1, j + 1})
	}

	var out []string
	for _, h := range hunks(ops) {
		out = append(out, h.header())
		for _, o := range h.ops {
			out = append(out, string(o.kind)+cutLine(o.text, lineMax))
		}
	}
	if len(out) > maxLines {
		out = append(out[:maxLines], fmt.Sprintf("… (%d more diff lines not shown)", len(out)-maxLines))
	}
	return "--- " + name + "\n+++ " + name + "\n" + strings.Join(out, "\n") + "\n"
}

// middle diffs the changed region by longest common subsequence of lines
// when it is small enough, and as a block replacement otherwise.
func middle(a, b []string, a0, b0 int) []op {
	var ops []op
	if len(a)*len(b) > lcsCells {
		for i, t := range a {
			ops = append(ops, op{opDel, t, a0 + i, 0})
		}
		for j, t := range b {
			ops = append(ops, op{opAdd, t, 0, b0 + j})
		}
		return ops
	}
	// l[i][j] is the LCS length of a[i:] and b[j:].
	w := len(b) + 1
	l := make([]int32, (len(a)+1)*w)
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				l[i*w+j] = l[(i+1)*w+j+1] + 1
			} else {
				l[i*w+j] = max(l[(i+1)*w+j], l[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, op{opEqual, a[i], a0 + i, b0 + j})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || l[(i+1)*w+j] >= l[i*w+j+1]):
			// Deletions before additions, as diff shows them.
			ops = append(ops, op{opDel, a[i], a0 + i, 0})
			i++
		default:
			ops = append(ops, op{opAdd, b[j], 0, b0 + j})
			j++
		}
	}
	return ops
}

type hunk struct{ ops []op }

// hunks groups ops around their changes, diffContext lines each side;
// changes closer than twice that share a hunk.
func hunks(ops []op) []hunk {
	var out []hunk
	for i := 0; i < len(ops); {
		if ops[i].kind == opEqual {
			i++
			continue
		}
		start := max(0, i-diffContext)
		end := i
		for k := i; k < len(ops); k++ {
			if ops[k].kind != opEqual {
				end = k
			} else if k-end > 2*diffContext {
				break
			}
		}
		stop := min(len(ops), end+1+diffContext)
		out = append(out, hunk{ops[start:stop]})
		i = stop
	}
	return out
}

func (h hunk) header() string {
	var aStart, bStart, aLen, bLen int
	for _, o := range h.ops {
		if o.kind != opAdd {
			if aLen == 0 {
				aStart = o.a
			}
			aLen++
		}
		if o.kind != opDel {
			if bLen == 0 {
				bStart = o.b
			}
			bLen++
		}
	}
	// An empty side is placed after the line before it, as diff does.
	if aLen == 0 {
		aStart = h.before(func(o op) int { return o.a })
	}
	if bLen == 0 {
		bStart = h.before(func(o op) int { return o.b })
	}
	return fmt.Sprintf("@@ -%d,%d +%d,%d @@", aStart, aLen, bStart, bLen)
}

// before is the line number preceding the hunk on one side (0 at the top).
func (h hunk) before(side func(op) int) int {
	for _, o := range h.ops {
		if n := side(o); n > 0 {
			return n - 1
		}
	}
	return 0
}
