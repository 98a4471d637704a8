package slashcmd

import (
	"fmt"
	"strings"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// RewindUsage is the argument syntax of /rewind.
const RewindUsage = "TURN[.STEP] [code|conversation|both] [--force]"

// ParseRewind reads the words after /rewind (redo false) or /redo (redo
// true). List is true for a bare /rewind, which lists the points to
// rewind to instead of rewinding. A bad word fails with
// errs.InvalidArgument naming it and the syntax.
func ParseRewind(args []string, redo bool) (r sessions.RewindRequest, list bool, err error) {
	if redo {
		if len(args) > 0 {
			return r, false, errs.New(errs.InvalidArgument, fmt.Sprintf("/redo takes no arguments (got %q); it undoes the last rewind", strings.Join(args, " ")))
		}
		return sessions.RewindRequest{Redo: true}, false, nil
	}
	if len(args) == 0 {
		return r, true, nil
	}
	for _, f := range args {
		switch f {
		case "code":
			r.Code = true
		case "conversation":
			r.Conversation = true
		case "both":
			r.Code, r.Conversation = true, true
		case "--force", "force":
			r.Force = true
		default:
			p, perr := session.ParsePoint(f)
			if perr != nil {
				return r, false, errs.New(errs.InvalidArgument, fmt.Sprintf("usage: /rewind %s, or /redo (%q is none of them)", RewindUsage, f))
			}
			r.To = p
		}
	}
	if r.To.Turn == 0 {
		return r, false, errs.New(errs.InvalidArgument, fmt.Sprintf("usage: /rewind %s; /rewind alone lists them", RewindUsage))
	}
	return r, false, nil
}

// Rewound says what a rewind or redo event did.
func Rewound(e session.Event) string {
	r := e.Rewind
	if r == nil {
		return "(nothing was done)"
	}
	var what []string
	if r.Code {
		what = append(what, fmt.Sprintf("the workspace (%d restored, %d removed)", r.Restored, r.Removed))
	}
	if r.Conversation {
		what = append(what, "the conversation")
	}
	s := strings.Join(what, " and ")
	if e.Type == session.Redone {
		s = fmt.Sprintf("redid the rewind at seq %d: %s", r.Redo, s)
	} else {
		s = fmt.Sprintf("rewound %s to before turn %s", s, r.To)
	}
	if r.Forced {
		s += fmt.Sprintf("; overwrote %d changed path(s): %s", len(r.Differed), strings.Join(r.Differed, "; "))
	}
	return s + " (/redo undoes it)"
}

// RewindPoints lists the turns the conversation shows and their steps
// with checkpoints, for a bare /rewind; how is the hint that ends the
// list (how to rewind from where the list is read).
func RewindPoints(events []session.Event, how string) string {
	var b strings.Builder
	for _, e := range session.Visible(events) {
		switch {
		case e.Type == session.UserMessage && e.Message != nil:
			fmt.Fprintf(&b, "%-6d %s\n", e.Turn, session.Title(e.Message.Content))
		case e.Type == session.Checkpointed && e.Checkpoint != nil:
			c := e.Checkpoint
			what := c.Scope
			if c.Scope == "paths" {
				what = strings.Join(c.Paths, ", ")
			}
			fmt.Fprintf(&b, "  %-6s %s %s (%d files, %d excluded)\n", session.Point{Turn: e.Turn, Step: e.Step}, c.Tool, what, c.Files, len(c.Excluded)+c.ExcludedMore)
		}
	}
	if b.Len() == 0 {
		return "nothing to rewind to yet\n"
	}
	b.WriteString(how + "\n")
	return b.String()
}
