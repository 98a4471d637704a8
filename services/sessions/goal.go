package sessions

import (
	stdctx "context"
	"fmt"
	"strings"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
	"github.com/google/uuid"
)

// A goal is an objective the session service keeps a session working
// toward: while it is active and the session idle, it sends the agent a
// continuation through the agent controller — entry "goal", from the
// principal who set the goal, on their behalf — so admission (policies,
// budgets, rate limits) judges each one like any other input. The model
// ends the goal with the goal_status tool, mounted in the agent's scope
// only while the goal is active; the goal's own budget (tokens, cost,
// turns, wall time) limits it otherwise. Every change is a goal event in
// the session log, so whoever opens the session next — after a crash, on
// another host — finds the goal there and drives it on.

// Codes of goal operations.
const (
	// NoGoal: the session has no goal to show, pause, resume or clear.
	NoGoal errs.Code = "SESSION_NO_GOAL"
	// GoalConflict: the goal's state does not allow the operation (resume
	// a complete goal, pause a paused one); the message says what does.
	GoalConflict errs.Code = "SESSION_GOAL_CONFLICT"
)

// GoalOp names an operation on a session's goal.
type GoalOp string

// Goal operations.
const (
	GoalSet    GoalOp = "set"
	GoalShow   GoalOp = "show"
	GoalPause  GoalOp = "pause"
	GoalResume GoalOp = "resume"
	GoalClear  GoalOp = "clear"
)

// GoalRequest is one operation on a session's goal (Service.Goal).
type GoalRequest struct {
	Op GoalOp `json:"op"`
	// Objective is what a set aims at.
	Objective string `json:"objective,omitempty"`
	// Budget bounds a set goal; on a resume a non-zero budget replaces
	// the goal's (raise it to resume a budget-limited goal).
	Budget session.GoalBudget `json:"budget,omitzero"`
	// Source is who asks: a set goal's continuations come from its
	// principal. Zero means the session's default source.
	Source Source `json:"source,omitzero"`
}

// Goal is a session's goal as Service.Goal returns it: its last record,
// with Spent counted up to now.
type Goal = session.Goal

// MaxObjective bounds the objective of a goal, in bytes: it is sent with
// every continuation.
const MaxObjective = 8 << 10

// GoalOptions configure how goals are driven; the config's goals: key.
type GoalOptions struct {
	// MinBackoff is the wait before the check-in after a turn that ran no
	// tool (the model only talked), doubled after each such turn up to
	// MaxBackoff; a turn that ran tools is followed at once. Defaults 1s
	// and 5m.
	MinBackoff time.Duration `koanf:"min_backoff" json:"min_backoff,omitempty"`
	MaxBackoff time.Duration `koanf:"max_backoff" json:"max_backoff,omitempty"`
	// Pricing prices the goal's tokens for a cost budget (the config's
	// pricing: key).
	Pricing usage.Pricing `koanf:"-" json:"-"`
}

// Default back-off bounds.
const (
	DefaultGoalMinBackoff = time.Second
	DefaultGoalMaxBackoff = 5 * time.Minute
)

// WithDefaults fills the unset bounds.
func (o GoalOptions) WithDefaults() GoalOptions {
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultGoalMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultGoalMaxBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	return o
}

// Validate refuses negative or inverted bounds.
func (o GoalOptions) Validate() error {
	if o.MinBackoff < 0 || o.MaxBackoff < 0 {
		return errs.New(errs.InvalidArgument, "goals: min_backoff and max_backoff cannot be negative; leave them out for 1s and 5m")
	}
	if o.MaxBackoff > 0 && o.MinBackoff > o.MaxBackoff {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("goals: min_backoff (%s) is above max_backoff (%s); the back-off grows from min to max", o.MinBackoff, o.MaxBackoff))
	}
	return nil
}

// Goal runs op on session id's goal; see Service.Goal.
func (c *Controller) Goal(ctx stdctx.Context, id string, r GoalRequest) (Goal, error) {
	s, err := c.session(id)
	if err != nil {
		return Goal{}, err
	}
	return s.Goal(ctx, r)
}

// Goal runs an operation on the session's goal and returns the goal as it
// stands after it.
func (s *Session) Goal(ctx stdctx.Context, r GoalRequest) (Goal, error) {
	d, err := s.goals()
	if err != nil {
		return Goal{}, err
	}
	src := r.Source
	if src.Kind == "" {
		src = s.source
	}
	who := principalName(src)
	if a := ActorOf(ctx); a != "" && who == "" {
		who = a
	}
	switch r.Op {
	case GoalShow:
		return d.show()
	case GoalSet:
		if err := checkGoal(r); err != nil {
			return Goal{}, err
		}
		return d.set(r.Objective, r.Budget, src, who)
	case GoalPause:
		return d.pause(who)
	case GoalResume:
		if err := checkBudget(r.Budget); err != nil {
			return Goal{}, err
		}
		return d.resume(r.Budget, who)
	case GoalClear:
		return d.clear(who)
	}
	return Goal{}, errs.New(errs.InvalidArgument, fmt.Sprintf("goal: unknown op %q; use set, show, pause, resume or clear", r.Op))
}

func checkGoal(r GoalRequest) error {
	obj := strings.TrimSpace(r.Objective)
	if obj == "" {
		return errs.New(errs.InvalidArgument, "goal: the objective is empty; say what the agent should achieve, as in /goal make the tests pass")
	}
	if len(obj) > MaxObjective {
		return errs.New(errs.InvalidArgument, fmt.Sprintf("goal: the objective is %d bytes, over the limit of %d; state it shorter and put details in a file the agent can read", len(obj), MaxObjective))
	}
	return checkBudget(r.Budget)
}

func checkBudget(b session.GoalBudget) error {
	switch {
	case b.Tokens < 0:
		return errs.New(errs.InvalidArgument, fmt.Sprintf("goal: the token budget is %d; give a positive number, or none for no bound", b.Tokens))
	case b.Cost < 0:
		return errs.New(errs.InvalidArgument, fmt.Sprintf("goal: the cost budget is %g; give a positive amount, or none for no bound", b.Cost))
	case b.Turns < 0:
		return errs.New(errs.InvalidArgument, fmt.Sprintf("goal: the turn budget is %d; give a positive number, or none for no bound", b.Turns))
	case b.Time < 0:
		return errs.New(errs.InvalidArgument, fmt.Sprintf("goal: the time budget is %s; give a positive duration such as 30m, or none for no bound", time.Duration(b.Time)))
	}
	return nil
}

// principalName writes a source's principal as "kind:id", or its entry
// point when it has none.
func principalName(src Source) string {
	if p := src.Principal; !p.IsZero() {
		return p.Kind + ":" + p.ID
	}
	if src.Entry != "" {
		return "an unnamed " + src.Entry + " client"
	}
	return ""
}

// goalSource is who a goal's continuations come from: the principal who
// set it, through the entry point "goal", on their own behalf.
func goalSource(set *session.Sender) Source {
	src := Source{Kind: agentcontroller.SourceUser, Entry: "goal"}
	if set == nil {
		return src
	}
	if set.Kind != "" {
		src.Kind = SourceKind(set.Kind)
	}
	src.Unattended = set.Unattended
	if set.Principal != nil {
		src.Principal = *set.Principal
		p := *set.Principal
		src.OnBehalfOf = &p
	}
	if set.OnBehalfOf != nil {
		// A delegate's goal still acts for the delegate's person.
		p := *set.OnBehalfOf
		src.OnBehalfOf = &p
	}
	return src
}

func newGoalID() string { return "goal-" + uuid.NewString()[:8] }
