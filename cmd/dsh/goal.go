package main

import (
	stdctx "context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/slashcmd"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// goalHelp is the /help line of /goal.
const goalHelp = "/goal TEXT   work toward TEXT across turns until done [--tokens N --cost X --turns N --time D];\n" +
	"             /goal alone shows it; /goal pause, resume [budget flags], clear\n"

// goalCommand runs "/goal …" on session id and says what became of the
// goal.
func goalCommand(svc sessions.Service, id, line string, out, diag io.Writer) {
	req, err := parseGoal(strings.TrimSpace(strings.TrimPrefix(line, "/goal")))
	if err != nil {
		fmt.Fprintf(diag, "dsh: %v\n", err)
		return
	}
	ctx := sessions.WithActor(stdctx.Background(), "/goal in dsh run")
	g, err := svc.Goal(ctx, id, req)
	if err != nil {
		fmt.Fprintf(diag, "dsh: %v\n", err)
		return
	}
	fmt.Fprintln(out, goalText(g))
}

// parseGoal reads the arguments of /goal (slashcmd.ParseGoal), its
// error as the bare message the CLI prints.
func parseGoal(args string) (sessions.GoalRequest, error) {
	req, err := slashcmd.ParseGoal(args)
	return req, bareError(err)
}

// bareError is err without its code prefix: the CLI says the message.
func bareError(err error) error {
	var e *errs.Error
	if errors.As(err, &e) {
		return errors.New(e.Message)
	}
	return err
}

// goalText is a goal in one line or two (slashcmd.GoalText).
func goalText(g sessions.Goal) string { return slashcmd.GoalText(g) }

// goalEventLine is how a goal event shows in the stream of a session.
func goalEventLine(e session.Event) string {
	if e.Goal == nil {
		return ""
	}
	line := fmt.Sprintf("(goal %s", e.Goal.State)
	if e.Goal.Reason != "" {
		line += ": " + oneLine(e.Goal.Reason, 200)
	}
	return line + ")\n"
}

// checkGoal refuses a --goal that cannot run: malformed, or beside a
// prompt.
func (f *runFlags) checkGoal() error {
	if f.goal == "" {
		return nil
	}
	if f.prompt != "" || f.command != "" || len(f.attach) > 0 {
		return fmt.Errorf("--goal drives the session by itself; leave out -p, --command and --attach")
	}
	req, err := parseGoal(f.goal)
	if err != nil {
		return fmt.Errorf("--goal: %v", strings.TrimPrefix(err.Error(), "/goal: "))
	}
	if req.Op != sessions.GoalSet && req.Op != sessions.GoalResume {
		return fmt.Errorf("--goal takes an objective with budget flags, or \"resume\"; to %s a goal, use /goal %s in an interactive session or the API", req.Op, req.Op)
	}
	return nil
}

// runGoal is dsh run --goal: it sets (or resumes) the session's goal,
// prints the session as it works, and returns when the goal is no longer
// active, with its state in the exit code: 0 complete, 3 budget-limited
// or refused by admission, 1 otherwise, 130 after Ctrl-C (which pauses
// the goal and cancels the turn).
func runGoal(h *host.Host, svc sessions.Service, info sessions.Info, ac config.AgentConfig, f *runFlags, stdout, stderr io.Writer, signals <-chan os.Signal) error {
	code := headlessGoal(h, svc, info, f, stdout, stderr, signals)
	reportSessionID(info.ID, h.Config().Persists(ac.ID), stderr)
	reportUsage(h.Config(), ac, svc, info.ID, f.json, stdout, stderr)
	if code != exitOK {
		return &exitCode{code: code}
	}
	return nil
}

func headlessGoal(h *host.Host, svc sessions.Service, info sessions.Info, fl *runFlags, stdout, stderr io.Writer, signals <-chan os.Signal) int {
	var mu sync.Mutex
	out, diag := syncWriter{&mu, stdout}, syncWriter{&mu, stderr}
	t := newTracker(out, diag, fl.json)
	t.echo = fl.echo
	t.dim = colorful(stderr)
	reportInterrupted(info, fl.json, out, diag)
	var answer approval.Answerer
	if answers(h) {
		answer = headlessAnswerer(fl.approvals, approvalNotifier(fl.json, out, diag))
	}
	f, err := follow(svc, info.ID, t, answer)
	if err != nil {
		fmt.Fprintf(diag, "dsh: session %s: cannot follow it: %v\n", info.ID, err)
		return exitError
	}
	defer f.stop()

	req, _ := parseGoal(fl.goal)
	ctx := sessions.WithActor(stdctx.Background(), "dsh run --goal")
	g, err := svc.Goal(ctx, info.ID, req)
	if err != nil && req.Op == sessions.GoalResume && errs.HasCode(err, sessions.GoalConflict) {
		// Resuming a goal the session already drives: follow it.
		if cur, serr := svc.Goal(ctx, info.ID, sessions.GoalRequest{Op: sessions.GoalShow}); serr == nil && cur.State == session.GoalActive {
			g, err = cur, nil
		}
	}
	if err != nil {
		fmt.Fprintf(diag, "dsh: %v\n", err)
		if errs.HasCode(err, errs.InvalidArgument) {
			return exitUsage
		}
		return exitError
	}
	if !fl.json {
		fmt.Fprintln(diag, goalText(g))
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	interrupted := false
	for {
		select {
		case <-signals:
			if interrupted {
				return exitInterrupted
			}
			interrupted = true
			fmt.Fprintln(diag, "\n(pausing the goal and cancelling the turn; Ctrl-C again to leave at once)")
			go func() {
				svc.Goal(sessions.WithActor(stdctx.Background(), "Ctrl-C in dsh run"), info.ID, sessions.GoalRequest{Op: sessions.GoalPause})
				svc.Cancel(sessions.WithActor(stdctx.Background(), "Ctrl-C in dsh run"), info.ID)
			}()
		case <-tick.C:
		}
		g, err = svc.Goal(ctx, info.ID, sessions.GoalRequest{Op: sessions.GoalShow})
		if err != nil {
			fmt.Fprintf(diag, "dsh: %v\n", err)
			return exitError
		}
		if g.State == session.GoalActive {
			continue
		}
		// The turn that ended the goal finishes before the run does.
		idle := make(chan error, 1)
		go func() { idle <- svc.Idle(stdctx.Background(), info.ID) }()
		select {
		case <-idle:
		case <-signals:
			return exitInterrupted
		}
		if in, err := svc.Info(ctx, info.ID); err == nil {
			f.until(in.LastSeq, 5*time.Second)
		}
		if g, err = svc.Goal(ctx, info.ID, sessions.GoalRequest{Op: sessions.GoalShow}); err != nil {
			fmt.Fprintf(diag, "dsh: %v\n", err)
			return exitError
		}
		if !fl.json {
			fmt.Fprintln(diag, goalText(g))
		}
		switch {
		case interrupted:
			return exitInterrupted
		case g.State == session.GoalComplete:
			return exitOK
		case g.State == session.GoalBudgetLimited || g.By == "admission":
			return exitRefused
		}
		return exitError
	}
}
