package main

import (
	"io"
	"os"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/sessions"
)

// richTerm is what an interactive session adds on a colour terminal: the
// screen with its status line, the Markdown renderer and the outputs
// /expand shows. Without it (NO_COLOR, TERM=dumb or unset, output not a
// terminal) the session prints exactly the plain text it always did.
type richTerm struct {
	scr       *termScreen
	out, diag io.Writer
	width     func() int
	md        *markdown
	outputs   *toolOutputs
}

// newRichTerm returns the rich terminal of a session whose stdout and
// stderr are the colour terminals given, or nil when they are not.
func newRichTerm(stdin io.Reader, stdout, stderr io.Writer) *richTerm {
	out, ok1 := stdout.(*os.File)
	errf, ok2 := stderr.(*os.File)
	if !ok1 || !ok2 || !richTerminal(out) || !richTerminal(errf) {
		return nil
	}
	var echo func(bool)
	if in, ok := stdin.(*os.File); ok && isTerminal(in) {
		echo = echoSwitch(in)
	}
	width := terminalWidth(out)
	scr := newTermScreen(out, width, echo)
	return &richTerm{scr: scr, out: scr.writer(out), diag: scr.writer(errf), width: width,
		md: &markdown{profile: colorProfile(os.Getenv)}, outputs: &toolOutputs{}}
}

// richTerminal reports whether f takes colour and motion: a terminal,
// NO_COLOR unset (no-color.org) and TERM naming a terminal that is not
// dumb. An unset TERM is a terminal nobody described, treated as dumb.
func richTerminal(f *os.File) bool {
	return colorful(f) && os.Getenv("TERM") != ""
}

func (r *richTerm) close() { r.scr.close() }

// view returns the renderer of session in, priced by the config's pricing.
func (r *richTerm) view(h *host.Host, in sessions.Info) *termView {
	cfg := h.Config()
	ac, _ := cfg.Agent(in.Agent)
	return newTermView(r.scr, r.out, r.diag, r.width, r.md, r.outputs, cfg.Account(ac))
}

// typed shows a line the person typed while the status line was up: the
// terminal's echo was off, so it was not on the screen yet.
func (r *richTerm) typed(line string) {
	if r.scr.showing() {
		io.WriteString(r.diag, sgrDim+"› "+printable(line)+sgrReset+"\n")
		return
	}
	// The terminal echoed the line and its newline.
	r.scr.atLineStart()
}

// richHelp is the help of the commands only rich mode has.
const richHelp = "/expand [N]  show the whole output of tool call N (default the last)\n"
