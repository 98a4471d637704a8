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

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// attached is the interactive session's hold on the agent it talks to. A
// --watch reload may recreate the agent; attach follows it.
type attached struct {
	agent  agents.Agent
	t      *tracker
	detach func()
}

// attach listens to agent's session: the tracker renders it, and every
// turn end is signalled on turnEnded.
func attach(agent agents.Agent, out, diag io.Writer, dim bool, echo int, turnEnded chan<- struct{}) (*attached, error) {
	t := newTracker(out, diag, false)
	t.dim, t.echo = dim, echo
	off, err := t.follow(agent)
	if err != nil {
		return nil, err
	}
	offEnd, err := session.EventAppended.On(agent.Context(), func(_ stdctx.Context, a session.Appended) error {
		if a.Event.Type == session.TurnEnd {
			select {
			case turnEnded <- struct{}{}:
			default:
			}
		}
		return nil
	})
	if err != nil {
		off()
		return nil, err
	}
	return &attached{agent: agent, t: t, detach: func() { off(); offEnd() }}, nil
}

// interactive reads prompts line by line until /quit, Ctrl-D or a Ctrl-C
// with no turn running.
func interactive(h *host.Host, sess *current, stdin io.Reader, stdout, stderr io.Writer, signals <-chan os.Signal, flags approvalFlags, echo int) error {
	agent := sess.get().UnportedAgent()
	var mu sync.Mutex
	out, diag := syncWriter{&mu, stdout}, syncWriter{&mu, stderr}
	dim := colorful(stderr)
	turnEnded := make(chan struct{}, 16)
	cur, err := attach(agent, out, diag, dim, echo, turnEnded)
	if err != nil {
		return &exitCode{code: exitError, err: err}
	}
	defer func() { cur.detach() }()

	send := newSender(sess, diag)
	defer send.close()

	// The agent's questions come to this loop, which owns the terminal:
	// the terminal is an approving client of the session's live hub.
	ask := newAsker()
	answerer := withFlags(flags, ask.answer, approvalNotifier(false, out, diag))
	appr, err := attachApprover(sess.get(), answerer, diag)
	if err != nil {
		return &exitCode{code: exitError, err: fmt.Errorf("agent %s: cannot attach the approval prompt: %w", agent.ID(), err)}
	}
	// Deny what is still asked before detaching: the detach waits for
	// the answers in flight to return.
	defer func() { ask.close(); appr.stop() }()
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

	fmt.Fprintf(out, "dsh: talking to agent %s.%s Type /help for commands, Ctrl-D to quit.\n> ", agent.ID(), resumedNote(agent))
	busy := func() bool { return cur.t.busy() || cur.agent.Pending() > 0 || send.waiting() > 0 }
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
				fmt.Fprint(out, "/steer TEXT  steer the running turn\n/cancel      cancel the running turn and drop what is queued\n/agents      list the agents\n/usage       tokens and cost of the last step, turn and session\n"+compactHelp+"/quit        leave (Ctrl-D does too)\nanything else is sent to the agent; while it is busy, it is queued\n> ")
			case line == "/usage":
				fmt.Fprint(out, interactiveUsage(h.Config(), sess, busy()))
			case line == "/cancel":
				send.drop()
				cur.agent.Cancel(fmt.Errorf("/cancel in dsh run"))
				fmt.Fprint(diag, "(cancelled)\n")
			case line == "/agents":
				for _, x := range h.Sessions().Sessions() {
					a := x.UnportedAgent()
					fmt.Fprintf(out, "%s  %s  %d waiting\n", a.ID(), a.Status(), a.Pending())
				}
				if !busy() {
					fmt.Fprint(out, "> ")
				}
			case line == "/compact":
				compactNow(cur.agent, busy(), out, diag)
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
				send.enqueue(text, parts, agentcontroller.Steer)
				fmt.Fprint(diag, "(steering)\n")
			case strings.HasPrefix(line, "/"):
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
				send.enqueue(line, parts, agentcontroller.Followup)
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
				fmt.Fprintf(diag, "dsh: the config was reloaded but agent %s cannot be reopened: %v\n", cur.agent.ID(), err)
				continue
			}
			if next == nil {
				continue
			}
			re, err := attach(next.UnportedAgent(), out, diag, dim, echo, turnEnded)
			if err != nil {
				fmt.Fprintf(diag, "dsh: the config was reloaded but agent %s cannot be followed: %v\n", next.AgentID(), err)
				continue
			}
			a, err := attachApprover(next, answerer, diag)
			if err != nil {
				fmt.Fprintf(diag, "dsh: agent %s cannot ask for approvals here: %v\n", next.AgentID(), err)
			} else {
				appr.stop()
				appr = a
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
				send.drop()
				cur.agent.Cancel(fmt.Errorf("Ctrl-C in dsh run"))
				fmt.Fprint(diag, "\n(denied; turn cancelled; Ctrl-C again or Ctrl-D to quit)\n")
				continue
			}
			if busy() {
				send.drop()
				cur.agent.Cancel(fmt.Errorf("Ctrl-C in dsh run"))
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
func followReload(h *host.Host, sess *current) (*sessions.Session, string, error) {
	cfg := h.Config()
	old := sess.get()
	ac, ok := cfg.Agent(old.AgentName())
	// A session a failed reopen left closed is opened again by the next
	// reload, even one that brings the old settings back.
	if ok && old.Open() && !sess.changed(cfg, ac) {
		return nil, "", nil
	}
	note := fmt.Sprintf("config reloaded; agent %s restarted with its new settings", ac.ID)
	if !ok {
		next, err := pickAgentConfig(cfg, "")
		if err != nil {
			return nil, "", nil
		}
		ac = next
		note = fmt.Sprintf("config reloaded; agent %s is gone, now talking to agent %s", old.AgentName(), ac.ID)
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	if err := old.Close(ctx); err != nil {
		return nil, "", err
	}
	s, err := openSession(ctx, h, ac)
	if err != nil {
		return nil, "", err
	}
	sess.set(cfg, ac, s)
	return s, note, nil
}

// resumedNote says what the agent's session already holds.
func resumedNote(agent agents.Agent) string {
	n := len(agent.Session().History().Messages())
	if n == 0 {
		return ""
	}
	note := fmt.Sprintf(" Session %s resumed with %d messages.", agent.Session().ID(), n)
	return note + interruptedNote(agent)
}

// interruptedNote is the greeting's sentence about an interrupted last
// turn, or "".
func interruptedNote(agent agents.Agent) string {
	text, ok := interruption(agent)
	if !ok {
		return ""
	}
	return " " + strings.ToUpper(text[:1]) + text[1:] + "."
}

// colorful reports whether w is a terminal that takes escape sequences
// (see no-color.org).
func colorful(w io.Writer) bool {
	return isTerminal(w) && os.Getenv("NO_COLOR") == "" && os.Getenv("TERM") != "dumb"
}
