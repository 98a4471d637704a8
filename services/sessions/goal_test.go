package sessions_test

import (
	stdctx "context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/usage"
)

var fastGoals = sessions.Options{Goals: sessions.GoalOptions{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}}

// goalState polls the session's goal until it is in state want.
func goalState(t *testing.T, svc sessions.Service, id string, want session.GoalState) sessions.Goal {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		g, err := svc.Goal(stdctx.Background(), id, sessions.GoalRequest{Op: sessions.GoalShow})
		if err != nil {
			t.Fatal(err)
		}
		if g.State == want {
			return g
		}
		if time.Now().After(deadline) {
			evs, _ := svc.History(stdctx.Background(), id, 0)
			var types []string
			for _, e := range evs[max(len(evs)-40, 0):] {
				types = append(types, string(e.Type)+"/"+e.Reason)
			}
			t.Fatalf("the goal is %s (%s, spent %+v), never %s; the log ends with: %v", g.State, g.Reason, g.Spent, want, types)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func alice() sessions.Source {
	return sessions.Source{Kind: sessions.SourceUser, Entry: "cli", Principal: llm.Principal{Kind: "user", ID: "alice"}}
}

// goalPrompts are the continuations the log holds, each with its sender.
func goalPrompts(evs []session.Event) []session.Event {
	var out []session.Event
	for _, e := range evs {
		if e.Type == session.UserMessage && e.Message != nil && e.Message.From != nil && e.Message.From.Entry == "goal" {
			out = append(out, e)
		}
	}
	return out
}

func TestAGoalRunsUntilTheModelReportsItComplete(t *testing.T) {
	e := newEnv(t, setup{opts: fastGoals, replies: []scripted.Reply{
		{Text: "nothing to do yet"},
		{ToolCalls: []scripted.Call{{Name: "goal_status", Arguments: `{"status":"complete","reason":"the file is written"}`}}},
		{Text: "done"},
	}})
	s := e.open(sessions.OpenOptions{})
	if in := s.Info(); slices.Contains(in.Tools, sessions.GoalStatusTool) {
		t.Fatal("goal_status is mounted without a goal")
	}
	g, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "write the file", Source: alice()})
	if err != nil {
		t.Fatal(err)
	}
	if g.State != session.GoalActive || g.By != "user:alice" {
		t.Fatalf("set: %+v", g)
	}
	done := goalState(t, e.ctl, s.ID(), session.GoalComplete)
	if done.By != "model" || done.Reason != "the file is written" {
		t.Fatalf("complete: %+v", done)
	}
	e.idle(s)
	evs := e.events(s)
	prompts := goalPrompts(evs)
	// The first turn only talked: a second check-in followed it.
	if len(prompts) != 2 {
		t.Fatalf("%d continuations, want 2", len(prompts))
	}
	from := prompts[0].Message.From
	if from.Principal.ID != "alice" || from.OnBehalfOf == nil || from.OnBehalfOf.ID != "alice" {
		t.Fatalf("the continuation's provenance: %+v", from)
	}
	if !strings.Contains(prompts[0].Message.Content, "write the file") {
		t.Fatalf("the continuation does not state the goal: %q", prompts[0].Message.Content)
	}
	// The turn that completed the goal counts: its record follows it.
	if g, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalShow}); err != nil || g.Spent.Turns != 2 {
		t.Fatalf("spent %+v (%v), want 2 turns", g.Spent, err)
	}
	var states []session.GoalState
	for _, ev := range evs {
		if ev.Type == session.GoalRecorded {
			states = append(states, ev.Goal.State)
		}
	}
	if !slices.Equal(states, []session.GoalState{session.GoalActive, session.GoalComplete}) {
		t.Fatalf("goal records %v", states)
	}
	// Unmounted once the goal is no longer active.
	deadline := time.Now().Add(5 * time.Second)
	for slices.Contains(s.Info().Tools, sessions.GoalStatusTool) {
		if time.Now().After(deadline) {
			t.Fatal("goal_status stays mounted after the goal completed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalResume}); !errs.HasCode(err, sessions.GoalConflict) {
		t.Fatalf("resuming a complete goal: %v", err)
	}
}

func TestAGoalStopsWhenItsTurnBudgetIsSpent(t *testing.T) {
	e := newEnv(t, setup{opts: fastGoals, replies: []scripted.Reply{{Text: "still working", Usage: &llm.Usage{InputTokens: 100, OutputTokens: 10}}}})
	s := e.open(sessions.OpenOptions{})
	_, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "never ends",
		Budget: session.GoalBudget{Turns: 3}, Source: alice()})
	if err != nil {
		t.Fatal(err)
	}
	g := goalState(t, e.ctl, s.ID(), session.GoalBudgetLimited)
	if g.By != "budget" || !strings.Contains(g.Reason, "3 of 3 turns") || g.Spent.Tokens != 330 {
		t.Fatalf("budget-limited: %+v", g)
	}
	e.idle(s)
	if n := len(goalPrompts(e.events(s))); n != 3 {
		t.Fatalf("%d continuations for a budget of 3 turns", n)
	}
	// Resuming needs a budget it has not spent.
	if _, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalResume}); !errs.HasCode(err, sessions.GoalConflict) {
		t.Fatalf("resume without a larger budget: %v", err)
	}
	if _, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalResume, Budget: session.GoalBudget{Tokens: 500}}); err != nil {
		t.Fatal(err)
	}
	g = goalState(t, e.ctl, s.ID(), session.GoalBudgetLimited)
	if !strings.Contains(g.Reason, "token budget") {
		t.Fatalf("after the resume: %+v", g)
	}
}

func TestAGoalRefusedByAdmissionIsBlocked(t *testing.T) {
	e := newEnv(t, setup{opts: fastGoals})
	agentcontroller.EventAdmission.On(e.root, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
		if a.Source.Entry == "goal" {
			return agentcontroller.Reject("test/no-goals", "goals are off here", false), nil
		}
		return next.Call(ctx, a)
	})
	s := e.open(sessions.OpenOptions{})
	if _, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "x", Source: alice()}); err != nil {
		t.Fatal(err)
	}
	g := goalState(t, e.ctl, s.ID(), session.GoalBlocked)
	if g.By != "admission" || !strings.Contains(g.Reason, "test/no-goals") || !strings.Contains(g.Reason, "goals are off here") {
		t.Fatalf("blocked: %+v", g)
	}
	// The prompts of people still pass.
	if _, err := e.ctl.Prompt(stdctx.Background(), s.ID(), sessions.PromptRequest{Content: "hi"}); err != nil {
		t.Fatal(err)
	}
}

func TestAGoalIsPausedResumedAndCleared(t *testing.T) {
	e := newEnv(t, setup{opts: sessions.Options{Goals: sessions.GoalOptions{MinBackoff: time.Hour}}})
	s := e.open(sessions.OpenOptions{})
	ctx := stdctx.Background()
	if _, err := e.ctl.Goal(ctx, s.ID(), sessions.GoalRequest{Op: sessions.GoalShow}); !errs.HasCode(err, sessions.NoGoal) {
		t.Fatalf("show without a goal: %v", err)
	}
	for _, bad := range []sessions.GoalRequest{
		{Op: sessions.GoalSet, Objective: "  "},
		{Op: sessions.GoalSet, Objective: "x", Budget: session.GoalBudget{Turns: -1}},
		{Op: "explode"},
	} {
		if _, err := e.ctl.Goal(ctx, s.ID(), bad); !errs.HasCode(err, errs.InvalidArgument) {
			t.Fatalf("%+v: %v", bad, err)
		}
	}
	if _, err := e.ctl.Goal(ctx, s.ID(), sessions.GoalRequest{Op: sessions.GoalPause}); !errs.HasCode(err, sessions.NoGoal) {
		t.Fatalf("pause without a goal: %v", err)
	}
	if _, err := e.ctl.Goal(ctx, s.ID(), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "x"}); err != nil {
		t.Fatal(err)
	}
	// The first check-in goes at once; the echo model only talks, so the
	// next waits an hour: the goal stays active and idle.
	deadline := time.Now().Add(10 * time.Second)
	for len(goalPrompts(e.events(s))) == 0 || s.Info().Running {
		if time.Now().After(deadline) {
			t.Fatal("no check-in")
		}
		time.Sleep(5 * time.Millisecond)
	}
	g, err := e.ctl.Goal(ctx, s.ID(), sessions.GoalRequest{Op: sessions.GoalPause})
	if err != nil || g.State != session.GoalPaused {
		t.Fatalf("pause: %+v %v", g, err)
	}
	// The paused goal's tool leaves the model's view.
	for deadline := time.Now().Add(5 * time.Second); slices.Contains(s.Info().Tools, sessions.GoalStatusTool); {
		if time.Now().After(deadline) {
			t.Fatal("goal_status stays mounted on a paused goal")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := e.ctl.Goal(ctx, s.ID(), sessions.GoalRequest{Op: sessions.GoalPause}); !errs.HasCode(err, sessions.GoalConflict) {
		t.Fatalf("pausing a paused goal: %v", err)
	}
	if g, err = e.ctl.Goal(ctx, s.ID(), sessions.GoalRequest{Op: sessions.GoalResume}); err != nil || g.State != session.GoalActive {
		t.Fatalf("resume: %+v %v", g, err)
	}
	if g, err = e.ctl.Goal(ctx, s.ID(), sessions.GoalRequest{Op: sessions.GoalClear}); err != nil || g.State != session.GoalCleared {
		t.Fatalf("clear: %+v %v", g, err)
	}
}

// A session closed with an active goal and resumed drives it on.
func TestAResumedSessionDrivesItsGoalOn(t *testing.T) {
	dir := t.TempDir()
	e := newEnv(t, setup{dir: dir, opts: sessions.Options{Goals: sessions.GoalOptions{MinBackoff: time.Hour}}})
	s := e.open(sessions.OpenOptions{SessionID: "g1"})
	if _, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "finish", Source: alice()}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(goalPrompts(e.events(s))) == 0 || s.Info().Running {
		if time.Now().After(deadline) {
			t.Fatal("no check-in")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	// An hour's back-off: the resumed goal's first check-in must be a new
	// one, not a retry of the last (which the agent controller would
	// answer from the log without a turn, and the back-off would follow).
	e2 := newEnv(t, setup{dir: dir, opts: sessions.Options{Goals: sessions.GoalOptions{MinBackoff: time.Hour}}, replies: []scripted.Reply{
		{ToolCalls: []scripted.Call{{Name: "goal_status", Arguments: `{"status":"complete","reason":"finished"}`}}},
		{Text: "ok"},
	}})
	s2, err := e2.ctl.Resume(stdctx.Background(), "g1", sessions.OpenOptions{Agent: "coder", Options: sessions.AgentOptions{Provider: "scripted"}})
	if err != nil {
		t.Fatal(err)
	}
	g := goalState(t, e2.ctl, s2.ID(), session.GoalComplete)
	if g.SetBy == nil || g.SetBy.Principal.ID != "alice" || g.CheckIns != 2 {
		t.Fatalf("resumed goal: %+v", g)
	}
	e2.idle(s2)
	prompts := goalPrompts(e2.events(s2))
	if len(prompts) != 2 || prompts[1].Message.From.Principal.ID != "alice" {
		t.Fatalf("continuations after the resume: %d", len(prompts))
	}
}

// A cost budget counts at the price table's prices, and stops a goal
// whose model it cannot price rather than let it spend without a bound.
func TestAGoalStopsWhenItsCostBudgetIsSpent(t *testing.T) {
	pricing := usage.Pricing{Models: map[string]usage.Price{"m1": {Input: 1000, Output: 1000}}}
	opts := sessions.Options{Goals: sessions.GoalOptions{MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond, Pricing: pricing}}
	reply := []scripted.Reply{{Text: "working", Usage: &llm.Usage{InputTokens: 100, OutputTokens: 10}}}
	for _, c := range []struct {
		model, reason string
		turns         int
	}{
		// 0.11 a turn: the third reaches 0.3.
		{"m1", "the cost budget is spent: 0.33 of 0.3", 3},
		{"m2", "the cost budget cannot be checked: the price table has no price for m2", 1},
	} {
		e := newEnv(t, setup{opts: opts, replies: reply})
		s := e.open(sessions.OpenOptions{Model: c.model})
		if _, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "spend",
			Budget: session.GoalBudget{Cost: 0.3}}); err != nil {
			t.Fatal(err)
		}
		g := goalState(t, e.ctl, s.ID(), session.GoalBudgetLimited)
		if !strings.Contains(g.Reason, c.reason) || g.Spent.Turns != c.turns {
			t.Fatalf("model %s: %+v", c.model, g)
		}
		e.idle(s)
	}
}

// A wall-time budget ends the goal at the first check-in past it.
func TestAGoalStopsWhenItsTimeBudgetIsSpent(t *testing.T) {
	e := newEnv(t, setup{opts: sessions.Options{Goals: sessions.GoalOptions{MinBackoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond}}})
	s := e.open(sessions.OpenOptions{})
	start := time.Now()
	if _, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "take your time",
		Budget: session.GoalBudget{Time: session.Duration(100 * time.Millisecond)}}); err != nil {
		t.Fatal(err)
	}
	g := goalState(t, e.ctl, s.ID(), session.GoalBudgetLimited)
	if !strings.Contains(g.Reason, "the time budget is spent") || time.Since(start) < 100*time.Millisecond || g.Spent.Turns < 2 {
		t.Fatalf("after %s: %+v", time.Since(start), g)
	}
	e.idle(s)
}

// Cancelling the goal's turn pauses the goal: a person who stops the
// work does not want the next continuation a moment later.
func TestCancellingAGoalsTurnPausesIt(t *testing.T) {
	e := newEnv(t, setup{opts: fastGoals, replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "hold"}}}, {Text: "ok"}}})
	g := e.gateTool("hold")
	s := e.open(sessions.OpenOptions{})
	if _, err := e.ctl.Goal(stdctx.Background(), s.ID(), sessions.GoalRequest{Op: sessions.GoalSet, Objective: "wait", Source: alice()}); err != nil {
		t.Fatal(err)
	}
	g.wait(t)
	if err := e.ctl.Cancel(sessions.WithActor(stdctx.Background(), "the tester"), s.ID()); err != nil {
		t.Fatal(err)
	}
	got := goalState(t, e.ctl, s.ID(), session.GoalPaused)
	if !strings.Contains(got.Reason, "its turn was cancelled") {
		t.Fatalf("paused: %+v", got)
	}
	e.idle(s)
	if n := len(goalPrompts(e.events(s))); n != 1 {
		t.Fatalf("%d continuations after the cancel, want 1", n)
	}
}
