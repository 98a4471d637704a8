package main

import (
	stdctx "context"
	"fmt"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/dsh-go/dsh/services/approval"
)

// asking is one question waiting for the person at the terminal.
type asking struct {
	req   approval.Request
	reply chan approval.Answer // buffered: the UI never blocks on it
	// gone is closed when the asker stopped waiting: the turn was
	// cancelled or the agent stopped.
	gone <-chan struct{}
	// reason is true once the person denied and may type a reason.
	reason bool
}

// asker is the interactive session's answerer. The agent's loop calls
// answer; the session's one UI goroutine, which owns stdin and the
// screen, takes each question from requests and replies — so a question
// and the lines typed meanwhile never race for the terminal.
type asker struct {
	requests  chan *asking
	closed    chan struct{}
	closeOnce sync.Once
}

func newAsker() *asker {
	return &asker{requests: make(chan *asking), closed: make(chan struct{})}
}

// answer is an approval.Answerer.
func (a *asker) answer(ctx stdctx.Context, req approval.Request) (approval.Answer, error) {
	q := &asking{req: req, reply: make(chan approval.Answer, 1), gone: ctx.Done()}
	select {
	case a.requests <- q:
	case <-ctx.Done():
		return approval.Answer{}, ctx.Err()
	case <-a.closed:
		return sessionEnded, nil
	}
	select {
	case ans := <-q.reply:
		return ans, nil
	case <-ctx.Done():
		return approval.Answer{}, ctx.Err()
	case <-a.closed:
		return sessionEnded, nil
	}
}

var sessionEnded = approval.Answer{Choice: approval.Deny, Reason: "the interactive session ended before the user answered"}

// close answers every question, asked or to come, with a denial.
func (a *asker) close() { a.closeOnce.Do(func() { close(a.closed) }) }

// question is what the terminal shows for req.
func question(req approval.Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n? %s wants to run", req.Tool)
	if req.Summary != "" {
		fmt.Fprintf(&b, ": %s", shown(req.Summary, maxShown))
	} else if args := briefArgs(req.Arguments, 200); args != "" {
		fmt.Fprintf(&b, " with %s", args)
	}
	b.WriteString("\n")
	if req.Reason != "" {
		fmt.Fprintf(&b, "  (%s)\n", oneLine(req.Reason, 200))
	}
	session := "every " + req.Tool + " call"
	if req.Pattern != "" {
		session = req.Tool + " " + shown(req.Pattern, 200)
	}
	fmt.Fprintf(&b, "  y allow once · a allow %s for this session · n deny (n REASON tells the model why) > ", session)
	return b.String()
}

// maxShown bounds the command a question shows; past it the question says
// how much is hidden.
const maxShown = 4000

// shown renders a command for the person approving it, so that what they
// read is what runs: each line on a line of its own (folding lines would
// make "ls\nrm -rf ~" read as ls with arguments), control and bidi
// characters escaped (a \r or an escape sequence could hide part of it on
// the terminal), and a cut that says how much it hides.
func shown(s string, max int) string {
	var b strings.Builder
	for i, r := range s {
		if i >= max {
			fmt.Fprintf(&b, "\n    [... %d more bytes not shown; deny unless you know the whole command]", len(s)-i)
			break
		}
		switch {
		case r == '\n':
			b.WriteString("\n    ")
		case r == utf8.RuneError:
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				fmt.Fprintf(&b, "\\x%02x", s[i])
			} else {
				b.WriteRune(r)
			}
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, "\\x%02x", r)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// parseAnswer reads a typed answer: y, a or n (or yes, always, no), case
// ignored; "n REASON" denies with a reason. ok is false for anything else;
// askReason is true for a bare n, whose reason may follow on its own line.
func parseAnswer(line string) (ans approval.Answer, askReason, ok bool) {
	word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	rest = strings.TrimSpace(rest)
	switch strings.ToLower(word) {
	case "y", "yes":
		return approval.Answer{Choice: approval.AllowOnce}, false, rest == ""
	case "a", "always":
		return approval.Answer{Choice: approval.AllowSession}, false, rest == ""
	case "n", "no":
		return approval.Answer{Choice: approval.Deny, Reason: rest}, rest == "", true
	}
	return approval.Answer{}, false, false
}

// denyReason is what the model is told when the person typed no reason.
const denyReason = "the user denied this call"

// withAsker wraps the interactive answerer with the flags' answers.
func withFlags(f approvalFlags, ask approval.Answerer, notify func(approvalEvent)) approval.Answerer {
	return func(ctx stdctx.Context, req approval.Request) (approval.Answer, error) {
		if ans, by, ok := f.preanswer(req); ok {
			notify(answered(req, ans, by))
			return ans, nil
		}
		return ask(ctx, req)
	}
}
