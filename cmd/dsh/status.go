package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	xansi "github.com/charmbracelet/x/ansi"
)

// termScreen is the terminal of an interactive session in rich mode: the
// answer (stdout), the notes (stderr) and a live region below them share
// it. The live region is the raw text of the answer's block being
// written (its last previewRows rows) and the status line. Every write
// goes through the screen, which erases the region, writes, and draws the
// region again below: streamed text and the status line never
// interleave, and nothing is left behind when the region goes. The region
// never holds more rows than fit on the screen, so it can always be
// erased; rows are cut to the width so the terminal never wraps them.
//
// The region is drawn only when the cursor is at the start of a line (a
// write that ended a line): a prompt waiting for an answer keeps the
// cursor where the person types. While it is drawn the terminal's echo is
// off — a typed line would otherwise be echoed into the region and its
// newline would strand a copy of it in the scrollback; the session prints
// the lines it reads instead.
type termScreen struct {
	mu    sync.Mutex
	term  io.Writer // where the region is drawn: the terminal
	width func() int
	echo  func(on bool) // turns the terminal's echo on or off; nil: leave it
	// line renders the status line for a spinner frame; nil: no status.
	line    func(frame string) string
	preview string    // the raw text of the block being written
	rows    int       // the rows of the region on the screen; 0: none
	drawn   time.Time // when the region was last drawn
	atBOL   bool      // the last write ended a line
	frame   int
	echoed  bool // the echo is on

	stop chan struct{}
	done chan struct{}
}

// previewRows bounds the rows of raw text the live region shows.
const previewRows = 8

// spinner is the status line's motion, one frame per tick.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// statusTick is how often the spinner and the elapsed time move.
const statusTick = 100 * time.Millisecond

func newTermScreen(term io.Writer, width func() int, echo func(on bool)) *termScreen {
	s := &termScreen{term: term, width: width, echo: echo, atBOL: true, echoed: true,
		stop: make(chan struct{}), done: make(chan struct{})}
	go s.tick()
	return s
}

func (s *termScreen) tick() {
	defer close(s.done)
	t := time.NewTicker(statusTick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.mu.Lock()
			s.frame++
			if s.line != nil {
				s.redraw()
			}
			s.mu.Unlock()
		}
	}
}

// close erases the region, gives the terminal its echo back and stops
// the spinner.
func (s *termScreen) close() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line, s.preview = nil, ""
	s.redraw()
	s.setEcho(true)
}

// show puts a status line in the region, rendered by line at every tick;
// nil removes it, and the preview with it.
func (s *termScreen) show(line func(frame string) string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line = line
	if line == nil {
		s.preview = ""
	}
	s.redraw()
}

// setPreview sets the raw text the region shows above the status line;
// the next write or tick draws it.
func (s *termScreen) setPreview(text string) {
	s.mu.Lock()
	s.preview = text
	s.mu.Unlock()
}

// refresh draws the region, unless it was drawn less than minRedraw ago:
// a fast stream would otherwise redraw the preview at every word. The
// next tick draws what a skipped refresh would have.
func (s *termScreen) refresh() {
	s.mu.Lock()
	if time.Since(s.drawn) >= minRedraw {
		s.redraw()
	}
	s.mu.Unlock()
}

// minRedraw is the shortest time between two refreshes of the region.
const minRedraw = 30 * time.Millisecond

// atLineStart tells the screen the cursor is at the start of a line
// although no write of its own put it there: the terminal echoed a line
// the person typed.
func (s *termScreen) atLineStart() {
	s.mu.Lock()
	s.atBOL = true
	s.mu.Unlock()
}

// showing says whether the region is up: the terminal's echo is off.
func (s *termScreen) showing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.echoed
}

// writer returns w with every write placed above the region.
func (s *termScreen) writer(w io.Writer) io.Writer { return screenWriter{s, w} }

type screenWriter struct {
	s *termScreen
	w io.Writer
}

func (sw screenWriter) Write(p []byte) (int, error) {
	s := sw.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rows > 0 {
		io.WriteString(s.term, s.erasure())
		s.rows = 0
	}
	n, err := sw.w.Write(p)
	if n > 0 {
		s.atBOL = p[n-1] == '\n'
	}
	s.redraw()
	return n, err
}

// Unwrap is the terminal under the writer, for isTerminal.
func (sw screenWriter) Unwrap() io.Writer { return sw.w }

// redraw replaces the region on the screen with its current state, in
// one write so that the terminal never shows it half drawn.
func (s *termScreen) redraw() {
	var b strings.Builder
	if s.rows > 0 {
		b.WriteString(s.erasure())
		s.rows = 0
	}
	if s.atBOL && s.line != nil {
		w := max(2, s.width()) - 1
		var rows []string
		if s.preview != "" {
			rows = strings.Split(xansi.Wrap(strings.ReplaceAll(s.preview, "\t", "    "), w, ""), "\n")
			rows = rows[max(0, len(rows)-previewRows):]
		}
		rows = append(rows, s.line(spinner[s.frame%len(spinner)]))
		for i, r := range rows {
			rows[i] = xansi.Truncate(r, w, "…") + "\x1b[0m"
		}
		b.WriteString(strings.Join(rows, "\r\n"))
		s.rows, s.drawn = len(rows), time.Now()
	}
	if b.Len() > 0 {
		io.WriteString(s.term, b.String())
	}
	// A prompt waits on the cursor's line when nothing is drawn: the
	// person must see what they type.
	s.setEcho(s.rows == 0)
}

// erasure moves to the region's first row and clears the screen from
// there; the cursor is on the region's last row.
func (s *termScreen) erasure() string {
	up := ""
	if s.rows > 1 {
		up = fmt.Sprintf("\x1b[%dA", s.rows-1)
	}
	return up + "\r\x1b[J"
}

func (s *termScreen) setEcho(on bool) {
	if s.echo == nil || s.echoed == on {
		return
	}
	s.echo(on)
	s.echoed = on
}

// terminalWidth is the width of the terminal f, or 80 when it has none.
func terminalWidth(f *os.File) func() int {
	return func() int {
		if w := windowWidth(f); w > 0 {
			return w
		}
		return 80
	}
}

// logSink is where the host's logs go: stderr, and in rich mode the
// screen's stderr writer, so that a warning printed while a turn runs
// lands above the status line instead of through it.
type logSink struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *logSink) Write(p []byte) (int, error) {
	l.mu.Lock()
	w := l.w
	l.mu.Unlock()
	return w.Write(p)
}

// to sends the logs to w from now on.
func (l *logSink) to(w io.Writer) {
	l.mu.Lock()
	l.w = w
	l.mu.Unlock()
}
