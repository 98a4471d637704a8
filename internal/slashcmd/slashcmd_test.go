package slashcmd_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/slashcmd"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

func TestParseRewind(t *testing.T) {
	for _, c := range []struct {
		args string
		redo bool
		want sessions.RewindRequest
		list bool
		bad  string // part of the error, when it fails
	}{
		{args: "", list: true},
		{args: "3", want: sessions.RewindRequest{To: session.Point{Turn: 3}}},
		{args: "3.2 code --force", want: sessions.RewindRequest{To: session.Point{Turn: 3, Step: 2}, Code: true, Force: true}},
		{args: "conversation 1", want: sessions.RewindRequest{To: session.Point{Turn: 1}, Conversation: true}},
		{args: "1 both force", want: sessions.RewindRequest{To: session.Point{Turn: 1}, Code: true, Conversation: true, Force: true}},
		{args: "code", bad: "/rewind alone lists them"},
		{args: "1 banana", bad: `"banana" is none of them`},
		{redo: true, want: sessions.RewindRequest{Redo: true}},
		{args: "2", redo: true, bad: "/redo takes no arguments"},
	} {
		r, list, err := slashcmd.ParseRewind(strings.Fields(c.args), c.redo)
		if c.bad != "" {
			if !errs.HasCode(err, errs.InvalidArgument) || !strings.Contains(err.Error(), c.bad) {
				t.Errorf("%q (redo %v): error %v, want one saying %q", c.args, c.redo, err, c.bad)
			}
			continue
		}
		if err != nil || list != c.list || r != c.want {
			t.Errorf("%q (redo %v): %+v list %v err %v, want %+v list %v", c.args, c.redo, r, list, err, c.want, c.list)
		}
	}
}

func TestParseGoal(t *testing.T) {
	r, err := slashcmd.ParseGoal("make the tests pass --turns 20 --time=30m --cost 2.5 --tokens 1000")
	if err != nil || r.Op != sessions.GoalSet || r.Objective != "make the tests pass" || r.Budget.Turns != 20 ||
		time.Duration(r.Budget.Time) != 30*time.Minute || r.Budget.Cost != 2.5 || r.Budget.Tokens != 1000 {
		t.Fatalf("%+v %v", r, err)
	}
	for args, op := range map[string]sessions.GoalOp{"": sessions.GoalShow, "pause": sessions.GoalPause, "clear": sessions.GoalClear, "resume --turns 3": sessions.GoalResume} {
		if r, err := slashcmd.ParseGoal(args); err != nil || r.Op != op {
			t.Errorf("%q: %+v %v, want op %s", args, r, err, op)
		}
	}
	for args, bad := range map[string]string{
		"pause now":       "takes nothing after it",
		"resume faster":   "budget flags only",
		"--turns 3":       "the objective is empty",
		"go --turns":      "needs a value",
		"go --turns many": `--turns "many" is not a positive whole number`,
		"go --time soon":  "a positive duration",
		"go --speed 3":    "unknown flag --speed",
	} {
		if _, err := slashcmd.ParseGoal(args); !errs.HasCode(err, errs.InvalidArgument) || !strings.Contains(err.Error(), bad) {
			t.Errorf("%q: error %v, want one saying %q", args, err, bad)
		}
	}
}

func TestRewoundSaysWhatHappened(t *testing.T) {
	e := session.Event{Type: session.Rewound, Rewind: &session.Rewind{To: session.Point{Turn: 2}, Code: true, Conversation: true, Restored: 3, Removed: 1,
		Forced: true, Differed: []string{"a.txt"}}}
	if got, want := slashcmd.Rewound(e), "rewound the workspace (3 restored, 1 removed) and the conversation to before turn 2; overwrote 1 changed path(s): a.txt (/redo undoes it)"; got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	e = session.Event{Type: session.Redone, Rewind: &session.Rewind{Redo: 7, Conversation: true}}
	if got := slashcmd.Rewound(e); got != "redid the rewind at seq 7: the conversation (/redo undoes it)" {
		t.Fatalf("redo: %q", got)
	}
	if got := slashcmd.RewindPoints(nil, "how"); got != "nothing to rewind to yet\n" {
		t.Fatalf("no points: %q", got)
	}
}
