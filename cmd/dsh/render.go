package main

import (
	"strings"
	"sync"

	"github.com/charmbracelet/glamour"
	xansi "github.com/charmbracelet/x/ansi"
	"github.com/muesli/termenv"
)

// An answer is rendered as Markdown one block at a time: a paragraph, a
// heading, a list, a table or a code fence is rendered and printed as soon
// as it is complete. Until then its raw text streams in the screen's live
// region, above the status line, and is replaced there by the rendered
// block. Rendering the whole answer again at each chunk would have to
// erase text that may have scrolled off the screen, which a terminal
// cannot do; a block, once printed, is never touched again, and the live
// region is never taller than the screen. A code fence longer than
// fenceChunk lines is printed in parts, so a long file does not wait for
// its end.

// fenceChunk is how many lines of an open code fence are held before
// they are printed.
const fenceChunk = 24

// mdStream cuts one answer's streamed text into Markdown blocks.
type mdStream struct {
	render func(md string) string

	partial string   // the last line, not yet ended
	block   []string // the lines of the open block
	fence   string   // the open code fence's marker; "" outside one
	list    bool     // the open block is a list: a blank line does not end it
	blank   bool     // the open list's last line was blank
	printed bool     // a block of this answer was printed
}

// write takes streamed text and returns what is ready to print.
func (m *mdStream) write(text string) string {
	var out strings.Builder
	text = m.partial + text
	for {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			break
		}
		out.WriteString(m.line(text[:i]))
		text = text[i+1:]
	}
	m.partial = text
	return out.String()
}

// flush ends the answer: what is held is printed, an open fence closed.
func (m *mdStream) flush() string {
	var out string
	if m.partial != "" {
		out = m.line(m.partial)
		m.partial = ""
	}
	if m.fence != "" {
		m.block = append(m.block, m.fence)
		m.fence = ""
	}
	out += m.emit()
	m.printed = false
	return out
}

// open is the raw text of the block being written, as it came so far.
func (m *mdStream) open() string {
	text := strings.Join(m.block, "\n")
	if m.partial != "" {
		if text != "" {
			text += "\n"
		}
		text += m.partial
	}
	return text
}

func (m *mdStream) line(l string) string {
	l = strings.TrimRight(l, "\r")
	trimmed := strings.TrimSpace(l)
	if m.fence != "" {
		m.block = append(m.block, l)
		if closesFence(trimmed, m.fence) {
			m.fence = ""
			return m.emit()
		}
		if len(m.block) > fenceChunk {
			// Print what came, as a fence of its own, and go on.
			open := m.block[0]
			m.block = append(m.block, m.fence)
			out := m.emit()
			m.block = []string{open}
			return out
		}
		return ""
	}
	if f := opensFence(trimmed); f != "" {
		out := m.emit()
		m.fence = f
		m.block = []string{l}
		return out
	}
	if trimmed == "" {
		if len(m.block) == 0 {
			return ""
		}
		if !m.list {
			return m.emit()
		}
		m.blank = true
		m.block = append(m.block, l)
		return ""
	}
	var out string
	if m.list && m.blank && !listItem(trimmed) && !strings.HasPrefix(l, " ") && !strings.HasPrefix(l, "\t") {
		out = m.emit()
	}
	if len(m.block) == 0 {
		m.list = listItem(trimmed)
	}
	m.blank = false
	m.block = append(m.block, l)
	if len(m.block) == 1 && strings.HasPrefix(trimmed, "#") {
		out += m.emit() // a heading is a block of one line
	}
	return out
}

// emit renders the open block, a blank line before it when it is not the
// answer's first.
func (m *mdStream) emit() string {
	for len(m.block) > 0 && strings.TrimSpace(m.block[len(m.block)-1]) == "" {
		m.block = m.block[:len(m.block)-1]
	}
	md := strings.Join(m.block, "\n")
	m.block, m.list, m.blank = nil, false, false
	if strings.TrimSpace(md) == "" {
		return ""
	}
	out := m.render(md)
	if out == "" {
		return ""
	}
	if m.printed {
		out = "\n" + out
	}
	m.printed = true
	return out
}

func opensFence(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(trimmed, c+c+c) {
			n := len(trimmed) - len(strings.TrimLeft(trimmed, c))
			return strings.Repeat(c, n)
		}
	}
	return ""
}

func closesFence(trimmed, fence string) bool {
	return strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == ""
}

// listItem says whether a line starts a list item: "- ", "* ", "+ " or
// "1. ", "1) ".
func listItem(trimmed string) bool {
	if len(trimmed) >= 2 && strings.ContainsRune("-*+", rune(trimmed[0])) && trimmed[1] == ' ' {
		return true
	}
	i := 0
	for i < len(trimmed) && i < 9 && trimmed[i] >= '0' && trimmed[i] <= '9' {
		i++
	}
	return i > 0 && i+1 < len(trimmed) && (trimmed[i] == '.' || trimmed[i] == ')') && trimmed[i+1] == ' '
}

// markdown renders Markdown for a terminal of a given width, with
// glamour's dark style and highlighted code blocks.
type markdown struct {
	profile termenv.Profile
	mu      sync.Mutex
	width   int
	r       *glamour.TermRenderer
}

// colorProfile is what the terminal is taken to show: 24-bit colour when
// COLORTERM says so, else the 256 colours every current terminal has.
func colorProfile(getenv func(string) string) termenv.Profile {
	switch getenv("COLORTERM") {
	case "truecolor", "24bit":
		return termenv.TrueColor
	}
	return termenv.ANSI256
}

// render returns md rendered for width columns, without the blank lines
// and the padding glamour puts around a block: the stream places blocks
// itself. What glamour cannot render is printed as it came.
func (r *markdown) render(md string, width int) string {
	md = printable(md)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.r == nil || r.width != width {
		tr, err := glamour.NewTermRenderer(
			glamour.WithStandardStyle("dark"),
			glamour.WithWordWrap(max(20, width-4)),
			glamour.WithColorProfile(r.profile),
		)
		if err != nil {
			return md + "\n"
		}
		r.r, r.width = tr, width
	}
	out, err := r.r.Render(md)
	if err != nil {
		return md + "\n"
	}
	return tidy(out)
}

// tidy drops the blank lines around a rendered block and the spaces that
// pad each line to the wrap width: padded lines would wrap on a terminal
// narrowed after they were printed.
func tidy(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = trimPadding(l)
	}
	for len(lines) > 0 && xansi.Strip(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && xansi.Strip(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// trimPadding removes the trailing spaces of a rendered line, escape
// sequences between them included, and resets the style after it.
func trimPadding(l string) string {
	end := len(l)
	for end > 0 {
		switch {
		case l[end-1] == ' ':
			end--
		case l[end-1] == 'm':
			i := strings.LastIndex(l[:end], "\x1b[")
			if i < 0 || strings.TrimLeft(l[i+2:end-1], "0123456789;") != "" {
				return l[:end] + "\x1b[0m"
			}
			end = i
		default:
			if end == len(l) {
				return l
			}
			return l[:end] + "\x1b[0m"
		}
	}
	return ""
}

// printable drops the control characters of a model's text but newlines
// and tabs: an escape sequence in an answer must not drive the terminal.
func printable(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return -1
		}
		return r
	}, s)
}

func isControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0)
}
