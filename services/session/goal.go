package session

import (
	"encoding/json"
	"fmt"
	"time"
)

// GoalRecorded records the state of a session's goal (Goal): an
// objective the session service keeps driving continuation turns toward
// until the model reports it complete or blocked, a person pauses or
// clears it, admission refuses a continuation or its budget runs out.
// Each change of state is one such event, so the log alone says what the
// goal is after a restart or on another host. It is not part of the
// history: the model learns about the goal from the continuation prompts.
const GoalRecorded Type = "goal"

// GoalState is where a goal stands.
type GoalState string

// Goal states. Only an active goal is driven; paused, blocked and
// budget-limited goals may be resumed; complete and cleared ones end it.
const (
	GoalActive        GoalState = "active"
	GoalPaused        GoalState = "paused"
	GoalBlocked       GoalState = "blocked"
	GoalBudgetLimited GoalState = "budget-limited"
	GoalComplete      GoalState = "complete"
	GoalCleared       GoalState = "cleared"
)

// Duration is a time.Duration written as Go writes one ("1h30m"), so a
// goal's wall-time budget reads the same in the log, the API and the CLI.
type Duration time.Duration

// MarshalJSON writes "1h30m0s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// UnmarshalJSON reads "90m" (a Go duration) or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var secs float64
		if err2 := json.Unmarshal(b, &secs); err2 != nil {
			return fmt.Errorf("a duration is a string such as \"90m\" or a number of seconds, not %s", b)
		}
		*d = Duration(secs * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration; write it as 90s, 30m or 2h", s)
	}
	*d = Duration(v)
	return nil
}

// GoalBudget bounds what a goal may spend; a zero field sets no bound.
type GoalBudget struct {
	// Tokens bounds the input and output tokens of the model requests
	// made while the goal is active.
	Tokens int `json:"tokens,omitempty"`
	// Cost bounds their cost, in the price table's currency.
	Cost float64 `json:"cost,omitempty"`
	// Turns bounds the turns that end while the goal is active.
	Turns int `json:"turns,omitempty"`
	// Time bounds the wall time the goal spends active.
	Time Duration `json:"time,omitempty"`
}

// IsZero reports whether the budget bounds nothing.
func (b GoalBudget) IsZero() bool { return b == GoalBudget{} }

// GoalSpent is what a goal has spent, as its record saw it.
type GoalSpent struct {
	Tokens int      `json:"tokens,omitempty"`
	Cost   float64  `json:"cost,omitempty"`
	Turns  int      `json:"turns,omitempty"`
	Time   Duration `json:"time,omitempty"`
}

// Goal is the record of a goal event: the whole state of the session's
// goal after a change, so the last record is the goal.
type Goal struct {
	// ID names one goal: a new objective gets a new id, and what a goal
	// spent is counted from the first record of its id.
	ID        string    `json:"id"`
	Objective string    `json:"objective"`
	State     GoalState `json:"state"`
	// Reason says why the goal is in State: the model's report, the
	// refusal of a continuation, the budget that ran out.
	Reason string `json:"reason,omitempty"`
	// By says who made this change: a principal ("user:alice"), "model"
	// (the goal_status tool), "admission" or "budget".
	By     string     `json:"by,omitempty"`
	Budget GoalBudget `json:"budget,omitzero"`
	// Spent is what the goal had spent when the record was written; the
	// session service recounts it from the log, so it is informative.
	Spent GoalSpent `json:"spent,omitzero"`
	// SetBy is who set the goal: each continuation is sent from them,
	// through the entry point "goal".
	SetBy *Sender `json:"set_by,omitempty"`
	// CheckIns counts the continuations sent so far.
	CheckIns int `json:"check_ins,omitempty"`
}

// Open reports whether the goal is still to be worked on (active, or
// stopped short of its end and resumable).
func (g Goal) Open() bool {
	switch g.State {
	case GoalActive, GoalPaused, GoalBlocked, GoalBudgetLimited:
		return true
	}
	return false
}

func (g Goal) clone() Goal {
	if g.SetBy != nil {
		src := *g.SetBy
		src.Principal, src.OnBehalfOf = clonePrincipal(src.Principal), clonePrincipal(src.OnBehalfOf)
		g.SetBy = &src
	}
	return g
}
