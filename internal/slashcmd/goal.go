package slashcmd

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// ParseGoal reads the arguments of /goal: nothing (show), pause, clear,
// resume with budget flags, or an objective with budget flags anywhere.
// A bad argument fails with errs.InvalidArgument saying how to fix it.
func ParseGoal(args string) (sessions.GoalRequest, error) {
	bad := func(format string, a ...any) error {
		return errs.New(errs.InvalidArgument, fmt.Sprintf(format, a...))
	}
	fields := strings.Fields(args)
	if len(fields) == 0 {
		return sessions.GoalRequest{Op: sessions.GoalShow}, nil
	}
	op := sessions.GoalSet
	switch fields[0] {
	case "show", "pause", "clear":
		if len(fields) > 1 {
			return sessions.GoalRequest{}, bad("/goal %s takes nothing after it", fields[0])
		}
		return sessions.GoalRequest{Op: sessions.GoalOp(fields[0])}, nil
	case "resume":
		op, fields = sessions.GoalResume, fields[1:]
	}
	req := sessions.GoalRequest{Op: op}
	var words []string
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if !strings.HasPrefix(f, "--") {
			words = append(words, f)
			continue
		}
		name, val, ok := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if !ok {
			if i+1 == len(fields) {
				return req, bad("/goal: --%s needs a value, as in --%s 10", name, name)
			}
			i++
			val = fields[i]
		}
		if err := setBudget(&req.Budget, name, val); err != nil {
			return req, err
		}
	}
	req.Objective = strings.Join(words, " ")
	if op == sessions.GoalResume && req.Objective != "" {
		return req, bad("/goal resume takes budget flags only; to change the objective, set a new goal with /goal TEXT")
	}
	if op == sessions.GoalSet && req.Objective == "" {
		return req, bad("/goal: the objective is empty; write what the agent should achieve, as in /goal make the tests pass --turns 20")
	}
	return req, nil
}

func setBudget(b *session.GoalBudget, name, val string) error {
	bad := func(want string) error {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("/goal: --%s %q is not %s", name, val, want))
	}
	switch name {
	case "tokens", "turns":
		n, err := strconv.Atoi(val)
		if err != nil || n <= 0 {
			return bad("a positive whole number")
		}
		if name == "tokens" {
			b.Tokens = n
		} else {
			b.Turns = n
		}
	case "cost":
		x, err := strconv.ParseFloat(val, 64)
		if err != nil || x <= 0 {
			return bad("a positive amount such as 2.50")
		}
		b.Cost = x
	case "time":
		d, err := time.ParseDuration(val)
		if err != nil || d <= 0 {
			return bad("a positive duration such as 30m or 2h")
		}
		b.Time = session.Duration(d)
	default:
		return errs.New(errs.InvalidArgument, fmt.Sprintf("/goal: unknown flag --%s; the budget flags are --tokens, --cost, --turns and --time", name))
	}
	return nil
}

// GoalText is a goal in one line or two: state, objective, budget spent.
func GoalText(g sessions.Goal) string {
	var b strings.Builder
	fmt.Fprintf(&b, "goal %s: %s", g.State, oneLine(g.Objective, 120))
	if g.Reason != "" {
		fmt.Fprintf(&b, "\n  (%s)", oneLine(g.Reason, 200))
	}
	if spent := spentText(g); spent != "" {
		fmt.Fprintf(&b, "\n  spent %s", spent)
	}
	return b.String()
}

// spentText says what the goal spent, against its budget where it has one.
func spentText(g sessions.Goal) string {
	of := func(spent, bound string, bounded bool) string {
		if bounded {
			return spent + " of " + bound
		}
		return spent
	}
	s, bu := g.Spent, g.Budget
	parts := []string{
		of(strconv.Itoa(s.Turns)+" turns", strconv.Itoa(bu.Turns), bu.Turns > 0),
		of(strconv.Itoa(s.Tokens)+" tokens", strconv.Itoa(bu.Tokens), bu.Tokens > 0),
		of(time.Duration(s.Time).Round(time.Second).String(), time.Duration(bu.Time).String(), bu.Time > 0),
	}
	if bu.Cost > 0 || s.Cost > 0 {
		parts = append(parts, of(fmt.Sprintf("%.4g cost", s.Cost), fmt.Sprintf("%.4g", bu.Cost), bu.Cost > 0))
	}
	return strings.Join(parts, ", ")
}

// oneLine is s on one line, cut to about n bytes (on a rune boundary).
func oneLine(s string, n int) string {
	if len(s) > n {
		// Cut before replacing: s may be megabytes long.
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + fmt.Sprintf("… (%d bytes)", len(s))
	}
	return strings.ReplaceAll(s, "\n", " ")
}
