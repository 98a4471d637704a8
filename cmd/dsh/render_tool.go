package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	xansi "github.com/charmbracelet/x/ansi"
)

// A tool call shows as one dim line — the tool and what it works on —
// and its result as its first previewLines lines under it; an edit's diff
// is shown in colour, up to diffLines lines. The whole output of every
// call stays available to /expand.

const (
	previewLines = 4
	diffLines    = 40
	// keptOutputs bounds the outputs /expand can show.
	keptOutputs = 100
)

// SGR sequences of the rich output.
const (
	sgrDim   = "\x1b[2m"
	sgrRed   = "\x1b[31m"
	sgrGreen = "\x1b[32m"
	sgrCyan  = "\x1b[36m"
	sgrBold  = "\x1b[1m"
	sgrReset = "\x1b[0m"
)

// summaryKeys are the arguments that say what a call works on, most
// telling first.
var summaryKeys = []string{"command", "path", "file_path", "pattern", "query", "url", "prompt", "description", "name"}

// toolSummary says in one line what a call does: its tool and the
// argument that names its object, else its arguments cut short.
func toolSummary(name, args string, width int) string {
	var m map[string]any
	what := ""
	if json.Unmarshal([]byte(args), &m) == nil {
		for _, k := range summaryKeys {
			if s, ok := m[k].(string); ok && s != "" {
				what = s
				break
			}
		}
		if what == "" && len(m) == 0 {
			args = ""
		}
	}
	if what == "" {
		what = args
	}
	what = strings.Join(strings.Fields(printable(what)), " ")
	return xansi.Truncate(strings.TrimSpace(name+" "+what), max(20, width-4), "…")
}

// toolPreview renders a call's result under its line: the first lines,
// or an edit's coloured diff, and how to see the rest.
func toolPreview(content string, isErr bool, n, width int) string {
	content = strings.TrimRight(printable(strings.ReplaceAll(content, "\t", "    ")), "\n")
	if content == "" {
		return sgrDim + "  ⎿ (no output)" + sgrReset + "\n"
	}
	lines := strings.Split(content, "\n")
	diff := !isErr && isDiff(lines)
	show := previewLines
	if diff {
		show = diffLines
	}
	var b strings.Builder
	for i, l := range lines[:min(len(lines), show)] {
		lead := "    "
		if i == 0 {
			lead = "  ⎿ "
		}
		l = xansi.Truncate(l, max(10, width-len(lead)-1), "…")
		switch {
		case isErr:
			b.WriteString(sgrDim + lead + sgrReset + sgrRed + l + sgrReset + "\n")
		case diff:
			b.WriteString(sgrDim + lead + sgrReset + diffColor(l) + "\n")
		default:
			b.WriteString(sgrDim + lead + l + sgrReset + "\n")
		}
	}
	if more := len(lines) - show; more > 0 {
		fmt.Fprintf(&b, "%s    … %d more lines (/expand %d)%s\n", sgrDim, more, n, sgrReset)
	}
	return b.String()
}

// isDiff tells an edit's result: a unified diff after its first line.
func isDiff(lines []string) bool {
	for i := 0; i+2 < len(lines) && i < 3; i++ {
		if strings.HasPrefix(lines[i], "--- ") && strings.HasPrefix(lines[i+1], "+++ ") && strings.HasPrefix(lines[i+2], "@@") {
			return true
		}
	}
	return false
}

func diffColor(l string) string {
	switch {
	case strings.HasPrefix(l, "+++ "), strings.HasPrefix(l, "--- "):
		return sgrBold + l + sgrReset
	case strings.HasPrefix(l, "@@"):
		return sgrCyan + l + sgrReset
	case strings.HasPrefix(l, "+"):
		return sgrGreen + l + sgrReset
	case strings.HasPrefix(l, "-"):
		return sgrRed + l + sgrReset
	}
	return sgrDim + l + sgrReset
}

// toolOutputs keeps the latest calls' outputs for /expand, numbered from
// 1 in the order they were shown.
type toolOutputs struct {
	mu   sync.Mutex
	next int
	kept []toolOutput
}

type toolOutput struct {
	n       int
	summary string
	content string
	isErr   bool
}

func (o *toolOutputs) add(summary, content string, isErr bool) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.next++
	o.kept = append(o.kept, toolOutput{o.next, summary, content, isErr})
	if len(o.kept) > keptOutputs {
		o.kept = o.kept[len(o.kept)-keptOutputs:]
	}
	return o.next
}

// expand renders output arg ("" for the last) whole, or says why not.
func (o *toolOutputs) expand(arg string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.kept) == 0 {
		return "no tool output yet in this session\n"
	}
	want := o.kept[len(o.kept)-1].n
	if arg != "" {
		if _, err := fmt.Sscanf(arg, "%d", &want); err != nil {
			return fmt.Sprintf("usage: /expand [N]: N is the number a tool call's preview shows, not %q\n", arg)
		}
	}
	for _, k := range o.kept {
		if k.n != want {
			continue
		}
		content := printable(k.content)
		if !strings.HasSuffix(content, "\n") {
			content += "\n"
		}
		head := fmt.Sprintf("%s#%d %s%s\n", sgrDim, k.n, k.summary, sgrReset)
		if k.isErr {
			return head + sgrRed + content + sgrReset
		}
		if lines := strings.Split(strings.TrimRight(content, "\n"), "\n"); isDiff(lines) {
			for i, l := range lines {
				lines[i] = diffColor(l)
			}
			return head + strings.Join(lines, "\n") + "\n"
		}
		return head + content
	}
	return fmt.Sprintf("no tool output %d: the last %d are kept (%d to %d)\n", want, len(o.kept), o.kept[0].n, o.kept[len(o.kept)-1].n)
}
