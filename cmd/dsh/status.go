package main

import (
	"io"
	"os"
	"sync"
	"time"

	xansi "github.com/charmbracelet/x/ansi"
)

// termScreen is the terminal of an interactive session in rich mode: the
// answer (stdout), the notes (stderr) and one status line below them all
// share it. Every write goes through it, so the status line is erased
// before the write and drawn again after it: streamed text and the status
// line never interleave, and nothing is left behind when the status goes.
//
// The status line is drawn only when the cursor is at the start of a line
// (a write that ended a line): a prompt waiting for an answer keeps the
// cursor where the person types. While it is drawn the terminal's echo is
// off — a typed line would otherwise be echoed onto the status line and
// its newline would strand a copy of the status in the scrollback; the
// session prints the lines it reads instead.
type termScreen struct {
	mu     sync.Mutex
	status io.Writer // where the status line is drawn: the terminal
	width  func() int
	echo   func(on bool) // turns the terminal's echo on or off; nil: leave it
	// line renders the status line for a spinner frame; nil: no status.
	line   func(frame string) string
	drawn  bool
	atBOL  bool // the last write ended a line
	frame  int
	echoed bool // the echo is on

	stop chan struct{}
	done chan struct{}
}

// spinner is the status line's motion, one frame per tick.
var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// statusTick is how often the spinner and the elapsed time move.
const statusTick = 100 * time.Millisecond

func newTermScreen(status io.Writer, width func() int, echo func(on bool)) *termScreen {
	s := &termScreen{status: status, width: width, echo: echo, atBOL: true, echoed: true,
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
			if s.line != nil && s.atBOL {
				s.draw()
			}
			s.mu.Unlock()
		}
	}
}

// close erases the status line, gives the terminal its echo back and
// stops the spinner.
func (s *termScreen) close() {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line = nil
	s.erase()
	s.setEcho(true)
}

// show puts a status line under the output, rendered by line at every
// tick; nil removes it.
func (s *termScreen) show(line func(frame string) string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.line = line
	if line == nil {
		s.erase()
		s.setEcho(true)
		return
	}
	if s.atBOL {
		s.draw()
	}
}

// atLineStart tells the screen the cursor is at the start of a line
// although no write of its own put it there: the terminal echoed a line
// the person typed.
func (s *termScreen) atLineStart() {
	s.mu.Lock()
	s.atBOL = true
	s.mu.Unlock()
}

// writer returns w with every write placed above the status line.
func (s *termScreen) writer(w io.Writer) io.Writer { return screenWriter{s, w} }

type screenWriter struct {
	s *termScreen
	w io.Writer
}

func (sw screenWriter) Write(p []byte) (int, error) {
	s := sw.s
	s.mu.Lock()
	defer s.mu.Unlock()
	s.erase()
	n, err := sw.w.Write(p)
	if n > 0 {
		s.atBOL = p[n-1] == '\n'
	}
	if s.line != nil && s.atBOL {
		s.draw()
	} else {
		// A prompt waits on this line: the person must see what they type.
		s.setEcho(true)
	}
	return n, err
}

// Unwrap is the terminal under the writer, for isTerminal.
func (sw screenWriter) Unwrap() io.Writer { return sw.w }

// draw writes the status line on the cursor's line, cut to the width so
// it never wraps (a wrapped line could not be erased from its last row).
func (s *termScreen) draw() {
	text := s.line(spinner[s.frame%len(spinner)])
	if w := s.width(); w > 1 {
		text = xansi.Truncate(text, w-1, "…")
	}
	io.WriteString(s.status, "\r\x1b[2K"+text+"\x1b[0m")
	s.drawn = true
	s.setEcho(false)
}

func (s *termScreen) erase() {
	if s.drawn {
		io.WriteString(s.status, "\r\x1b[2K")
		s.drawn = false
	}
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

// showing says whether a status line is up: the terminal's echo is off.
func (s *termScreen) showing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.echoed
}
