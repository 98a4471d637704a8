package main

import (
	"bufio"
	stdctx "context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// attached is the interactive session's view of the session it talks
// to: one stream, rendered by the tracker, answering approvals at the
// terminal. A --watch reload may reopen the session; attach follows it.
type attached struct {
	id string
	t  *tracker
	f  *viewer
	// offCompact stops the compaction notes.
	offCompact func()
}

func (a *attached) detach() { a.f.stop(); a.offCompact() }

// attach follows session in: the tracker renders it, every turn end is
// signalled on turnEnded, and answer answers its approval questions.
func attach(h *host.Host, svc sessions.Service, in sessions.Info, out, diag io.Writer, dim bool, echo int, turnEnded chan<- struct{}, answer approval.Answerer, rich *richTerm) (*attached, error) {
	t := newTracker(out, diag, false)
	t.dim, t.echo, t.turnEnded = dim, echo, turnEnded
	if rich != nil {
		t.view = rich.view(h, in)
	}
	if !answers(h) {
		answer = nil
	}
	f, err := follow(svc, in.ID, t, answer)
	if err != nil {
		return nil, err
	}
	off, err := followCompactions(h, in.AgentID, diag)
	if err != nil {
		f.stop()
		return nil, err
	}
	return &attached{id: in.ID, t: t, f: f, offCompact: off}, nil
}

// interactive reads prompts line by line until /quit, Ctrl-D or a Ctrl-C
// with no turn running.
func interactive(h *host.Host, sess *current, stdin io.Reader, stdout, stderr io.Writer, signals <-chan os.Signal, flags approvalFlags, echo int) error {
	return interactiveLogged(h, sess, stdin, stdout, stderr, signals, flags, echo, nil)
}

// interactiveLogged is interactive with the host's logs: on a colour
// terminal they are written above the status line, not through it.
func interactiveLogged(h *host.Host, sess *current, stdin io.Reader, stdout, stderr io.Writer, signals <-chan os.Signal, flags approvalFlags, echo int, logs *logSink) error {
	svc := sess.svc
	info := sess.get()
	var mu sync.Mutex
	var out, diag io.Writer = syncWriter{&mu, stdout}, syncWriter{&mu, stderr}
	dim := colorful(stderr)
	rich := newRichTerm(stdin, stdout, stderr)
	if rich != nil {
		out, diag = rich.out, rich.diag
		defer rich.close()
		if logs != nil {
			logs.to(diag)
			defer logs.to(stderr)
		}
	}
	turnEnded := make(chan struct{}, 16)

	send := newSender(sess, diag)
	defer send.close()

	// The agent's questions come to this loop, which owns the terminal:
	// the terminal's stream is an approving client of the session.
	ask := newAsker()
	answerer := withFlags(flags, ask.answer, approvalNotifier(false, out, diag))
	cur, err := attach(h, svc, info, out, diag, dim, echo, turnEnded, answerer, rich)
	if err != nil {
		return &exitCode{code: exitError, err: fmt.Errorf("session %s: cannot follow it: %w", info.ID, err)}
	}
	// Deny what is still asked before detaching: the detach waits for
	// the answers in flight to return.
	defer func() { ask.close(); cur.detach() }()
	// cancel cancels the session's turn, not only its agent's: the
	// session records who cancelled on what it drops.
	cancel := func(who string) {
		// Lines never handed to the session have no record to show their
		// drop; the ones the session has are shown from its stream.
		for _, o := range send.drop() {
			fmt.Fprintf(diag, "not delivered (%s): %s\n", droppedWhy(session.Event{Reason: session.DroppedCancelled, By: who}), oneLine(printable(o.text), 200))
		}
		id := cur.id
		go svc.Cancel(sessions.WithActor(stdctx.Background(), who), id)
	}
	var pending *asking // the question on screen

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdin)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()

	fmt.Fprintf(out, "dsh: talking to agent %s.%s Type /help for commands, Ctrl-D to quit.\n> ", info.AgentID, resumedNote(info))
	busy := func() bool {
		if cur.t.busy() || send.waiting() > 0 {
			return true
		}
		in, err := svc.Info(stdctx.Background(), cur.id)
		return err == nil && in.Pending > 0
	}
	reloaded := h.Reloaded()
	owed := false // a turn ended while something was still busy
	for {
		var withdrawn <-chan struct{}
		if pending != nil {
			withdrawn = pending.gone
		}
		select {
		case q := <-ask.requests:
			pending = q
			fmt.Fprint(out, question(q.req))
		case <-withdrawn:
			pending = nil
			fmt.Fprint(diag, "(the question was withdrawn: the turn ended)\n")
		case line, ok := <-lines:
			if !ok {
				fmt.Fprintln(out)
				return nil
			}
			line = strings.TrimSpace(line)
			if rich != nil {
				rich.typed(line)
			}
			if pending != nil {
				if line != "/cancel" && line != "/quit" && line != "/exit" {
					pending = answerLine(pending, line, out)
					continue
				}
				pending.reply <- approval.Answer{Choice: approval.Deny, Reason: "the user cancelled the turn"}
				pending = nil
			}
			switch {
			case line == "":
				if !busy() {
					fmt.Fprint(out, "> ")
				}
			case line == "/quit" || line == "/exit":
				return nil
			case line == "/help":
				more := ""
				if rich != nil {
					more = richHelp
				}
				fmt.Fprint(out, "/steer TEXT  steer the running turn\n/cancel      cancel the running turn and drop what is queued\n/agents      list the agents\n/usage       tokens and cost of the last step, turn and session\n"+compactHelp+jobsHelp+rewindHelp+planHelp+goalHelp+more+"/quit        leave (Ctrl-D does too)\n"+promptCommandsHelp(sessionCommands(svc, cur.id))+"anything else is sent to the agent; while it is busy, it is queued\n> ")
			case rich != nil && (line == "/expand" || strings.HasPrefix(line, "/expand ")):
				fmt.Fprint(out, rich.outputs.expand(strings.TrimSpace(strings.TrimPrefix(line, "/expand"))))
				if !busy() {
					fmt.Fprint(out, "> ")
				}
			case line == "/usage":
				fmt.Fprint(out, interactiveUsage(h.Config(), sess, busy()))
			case line == "/cancel":
				cancel("/cancel in dsh run")
				fmt.Fprint(diag, "(cancelled)\n")
			case line == "/agents":
				for _, x := range h.Sessions().Sessions() {
					in := x.Info()
					fmt.Fprintf(out, "%s  %s  %d waiting\n", in.AgentID, statusOf(in), in.Pending)
				}
				if !busy() {
					fmt.Fprint(out, "> ")
				}
			case line == "/jobs" || strings.HasPrefix(line, "/jobs "):
				jobsCommand(h, sess.get().AgentID, strings.TrimPrefix(line, "/jobs"), out, diag)
				if !busy() {
					fmt.Fprint(out, "> ")
				}
			case line == "/rewind" || strings.HasPrefix(line, "/rewind ") || line == "/redo":
				slashRewind(svc, cur.id, line, out, diag)
				if !busy() {
					fmt.Fprint(out, "> ")
				}
			case line == "/goal" || strings.HasPrefix(line, "/goal "):
				goalCommand(svc, cur.id, line, out, diag)
				if !busy() {
					fmt.Fprint(out, "> ")
				}
			case line == "/compact":
				compactNow(h, sess.get().AgentID, busy(), out, diag)
			case isPlanCommand(line):
				planCommand(svc, cur.id, sess.workspace(), line, out, diag)
				if !busy() {
					fmt.Fprint(out, "> ")
				}
			case strings.HasPrefix(line, "/steer"):
				text := strings.TrimSpace(strings.TrimPrefix(line, "/steer"))
				if text == "" {
					fmt.Fprint(diag, "usage: /steer TEXT\n")
					continue
				}
				parts, err := mentions(sess.workspace(), text, h.Config().Attachments)
				if err != nil {
					fmt.Fprintf(diag, "dsh: not sent: %v\n", err)
					continue
				}
				send.enqueue(text, parts, true)
				fmt.Fprint(diag, "(steering)\n")
			case strings.HasPrefix(line, "/") && !isPromptCommand(sessionCommands(svc, cur.id), line):
				fmt.Fprintf(diag, "unknown command %s; /help lists them\n", strings.Fields(line)[0])
			default:
				// @path mentions attach workspace files; a mention that
				// cannot be read keeps the line from being sent at all.
				parts, err := mentions(sess.workspace(), line, h.Config().Attachments)
				if err != nil {
					fmt.Fprintf(diag, "dsh: not sent: %v\n> ", err)
					continue
				}
				if busy() {
					fmt.Fprint(diag, "(queued)\n")
				}
				send.enqueue(line, parts, false)
			}
		case <-turnEnded:
			// A turn can end before the delivery that started it has
			// returned to the sender; the prompt then waits for settled.
			owed = true
			if !busy() {
				fmt.Fprint(out, "> ")
				owed = false
			}
		case <-send.settled:
			if owed && !busy() {
				fmt.Fprint(out, "> ")
				owed = false
			}
		case <-reloaded:
			reloaded = h.Reloaded()
			next, note, err := followReload(h, sess)
			if err != nil {
				fmt.Fprintf(diag, "dsh: the config was reloaded but agent %s cannot be reopened: %v\n", sess.get().AgentID, err)
				continue
			}
			if next == nil {
				continue
			}
			re, err := attach(h, svc, *next, out, diag, dim, echo, turnEnded, answerer, rich)
			if err != nil {
				fmt.Fprintf(diag, "dsh: the config was reloaded but agent %s cannot be followed: %v\n", next.AgentID, err)
				continue
			}
			cur.detach()
			cur = re
			fmt.Fprintf(diag, "(%s)\n", note)
			if !busy() {
				fmt.Fprint(out, "> ")
			}
		case <-signals:
			if pending != nil {
				// Ctrl-C at a question: no, and stop the turn.
				pending.reply <- approval.Answer{Choice: approval.Deny, Reason: "the user interrupted the turn"}
				pending = nil
				cancel("Ctrl-C in dsh run")
				fmt.Fprint(diag, "\n(denied; turn cancelled; Ctrl-C again or Ctrl-D to quit)\n")
				continue
			}
			if busy() {
				cancel("Ctrl-C in dsh run")
				fmt.Fprint(diag, "\n(turn cancelled; Ctrl-C again or Ctrl-D to quit)\n")
				continue
			}
			fmt.Fprintln(out)
			return nil
		}
	}
}

// answerLine takes a typed line as the answer to q, and returns the
// question still open: q when the line was no answer or a reason may
// follow, nil once q is answered.
func answerLine(q *asking, line string, out io.Writer) *asking {
	if q.reason {
		reason := strings.TrimSpace(line)
		if reason == "" {
			reason = denyReason
		}
		q.reply <- approval.Answer{Choice: approval.Deny, Reason: reason}
		fmt.Fprint(out, "(denied)\n")
		return nil
	}
	ans, askReason, ok := parseAnswer(line)
	switch {
	case !ok:
		fmt.Fprint(out, "  answer y (allow once), a (allow for this session) or n (deny) > ")
		return q
	case askReason:
		q.reason = true
		fmt.Fprint(out, "  reason for the model (Enter for none) > ")
		return q
	}
	q.reply <- ans
	switch ans.Choice {
	case approval.AllowOnce:
		fmt.Fprint(out, "(allowed once)\n")
	case approval.AllowSession:
		fmt.Fprint(out, "(allowed for this session)\n")
	default:
		fmt.Fprint(out, "(denied)\n")
	}
	return nil
}

// followReload reopens the session after a reload that changed its
// agent's settings or presets: the old session is closed (its agent
// disposed) and the agent opened again as at start — its session: resumed,
// so a configured session keeps its history. An agent the reload removed
// gives way to the first configured one. It returns nil when nothing the
// session depends on changed; the note says what changed.
func followReload(h *host.Host, sess *current) (*sessions.Info, string, error) {
	cfg := h.Config()
	old := sess.get()
	ac, ok := cfg.Agent(old.Agent)
	// A session a failed reopen left closed is opened again by the next
	// reload, even one that brings the old settings back.
	_, err := sess.svc.Info(stdctx.Background(), old.ID)
	if ok && err == nil && !sess.changed(cfg, ac) {
		return nil, "", nil
	}
	note := fmt.Sprintf("config reloaded; agent %s restarted with its new settings", ac.ID)
	if !ok {
		next, err := pickAgentConfig(cfg, "")
		if err != nil {
			return nil, "", nil
		}
		ac = next
		note = fmt.Sprintf("config reloaded; agent %s is gone, now talking to agent %s", old.Agent, ac.ID)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := sess.svc.Close(ctx, old.ID); err != nil && !errs.HasCode(err, sessions.NotFound) {
		return nil, "", err
	}
	in, err := openSession(ctx, sess.svc, ac)
	if err != nil {
		return nil, "", err
	}
	sess.set(cfg, ac, in)
	return &in, note, nil
}

// resumedNote says what the session already holds.
func resumedNote(in sessions.Info) string {
	if in.Messages == 0 {
		return ""
	}
	note := fmt.Sprintf(" Session %s resumed with %d messages.", in.ID, in.Messages)
	return note + interruptedNote(in)
}

// interruptedNote is the greeting's sentence about an interrupted last
// turn, or "".
func interruptedNote(in sessions.Info) string {
	text, ok := interruption(in)
	if !ok {
		return ""
	}
	return " " + strings.ToUpper(text[:1]) + text[1:] + "."
}

// statusOf names what a session's agent does, as /agents shows it.
func statusOf(in sessions.Info) string {
	if in.Running {
		return "running"
	}
	return "idle"
}

// colorful reports whether w is a terminal that takes escape sequences
// (see no-color.org).
func colorful(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}
