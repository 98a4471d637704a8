package sessions

import (
	stdctx "context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/usage"
)

// goalDriver keeps one session's goal: its state (the last record, or a
// change not yet appended), what it spent (counted from the log), the
// goal_status tool while the goal is active, and the goroutine that sends
// continuations while it is.
type goalDriver struct {
	s    *Session
	opts GoalOptions

	mu  sync.Mutex
	cur Goal // State "" when the session never had a goal
	cnt goalCount
	// running: a drive goroutine is on; it ends when the goal is not
	// active, and set or resume start another.
	running bool
	closed  bool
	backoff time.Duration

	wake   chan struct{}
	ctx    stdctx.Context
	cancel stdctx.CancelFunc
	wg     sync.WaitGroup

	toolMu sync.Mutex
	tool   *dshctx.Fiber
}

// goalRecorder is the part of an agent that appends an event from the
// one goroutine that appends (agentloop's driver).
type goalRecorder interface {
	RecordEvent(ev session.Event) error
}

// goals returns the session's goal driver, made on first use from the
// goals its log holds. A session closing makes none: its close would not
// see it to stop it.
func (s *Session) goals() (*goalDriver, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.state != stateOpen {
		return nil, closedErr(s.id)
	}
	if s.goal == nil {
		s.goal = newGoalDriver(s)
	}
	return s.goal, nil
}

// resumeGoal picks up the goal a resumed session's log holds: an active
// one is driven on from here, whoever set it and wherever it ran before.
func (s *Session) resumeGoal() {
	if log := s.handle.Agent.Session(); log == nil || log.FirstGoal() == 0 {
		return
	}
	d, err := s.goals()
	if err != nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur.State == session.GoalActive {
		d.startLocked()
	}
}

// newGoalDriver reads the session's goal from its log: the last goal
// record is the goal, and what it spent is counted from the first.
func newGoalDriver(s *Session) *goalDriver {
	d := &goalDriver{s: s, opts: s.c.goalOpts.WithDefaults(), wake: make(chan struct{}, 1)}
	d.ctx, d.cancel = stdctx.WithCancel(stdctx.Background())
	d.cnt.pricing = d.opts.Pricing
	log := s.handle.Agent.Session()
	if log == nil {
		return d
	}
	if from := log.FirstGoal(); from > 0 {
		d.cnt.next = from
		for _, e := range log.Events(from) {
			d.cnt.add(e)
			if e.Type == session.GoalRecorded && e.Goal != nil {
				d.cur = *e.Goal
			}
		}
		// Check-ins sent after the last record (a crash came before the
		// next) are in the log as their continuations.
		if d.cur.ID == d.cnt.id {
			d.cur.CheckIns = max(d.cur.CheckIns, d.cnt.checkIns)
		}
	}
	return d
}

// count folds the log's new events into what the goal spent; the caller
// holds mu.
func (d *goalDriver) countLocked() {
	if log := d.s.handle.Agent.Session(); log != nil && d.cnt.next > 0 {
		for _, e := range log.Events(d.cnt.next) {
			d.cnt.add(e)
		}
	}
}

// snapshotLocked is the goal with what it spent up to now.
func (d *goalDriver) snapshotLocked() Goal {
	d.countLocked()
	g := d.cur
	if g.ID == d.cnt.id {
		g.Spent = d.cnt.spent(time.Now())
	}
	return g
}

func (d *goalDriver) show() (Goal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur.State == "" {
		return Goal{}, errs.New(NoGoal, fmt.Sprintf("session %q has no goal; set one with /goal TEXT or POST /v1/sessions/%s/goal", d.s.id, d.s.id))
	}
	return d.snapshotLocked(), nil
}

func (d *goalDriver) set(objective string, b session.GoalBudget, src Source, who string) (Goal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g := Goal{ID: newGoalID(), Objective: strings.TrimSpace(objective), State: session.GoalActive, By: who,
		Budget: b, SetBy: agentcontroller.SenderOf(src)}
	if err := d.changeLocked(g); err != nil {
		return Goal{}, err
	}
	d.backoff = 0
	d.startLocked()
	return d.snapshotLocked(), nil
}

func (d *goalDriver) pause(who string) (Goal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.needLocked("pause", session.GoalActive); err != nil {
		return Goal{}, err
	}
	return d.moveLocked(session.GoalPaused, "paused by "+orSomeone(who), who)
}

func (d *goalDriver) resume(b session.GoalBudget, who string) (Goal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.needLocked("resume", session.GoalPaused, session.GoalBlocked, session.GoalBudgetLimited); err != nil {
		return Goal{}, err
	}
	g := d.cur
	if !b.IsZero() {
		g.Budget = b
	}
	d.countLocked()
	if over := d.cnt.over(g.Budget, time.Now()); over != "" && d.cnt.id == g.ID {
		return Goal{}, errs.New(GoalConflict, fmt.Sprintf("session %q: the goal cannot resume: %s; resume it with a larger budget (/goal resume --tokens N …)", d.s.id, over))
	}
	g.State, g.Reason, g.By = session.GoalActive, "resumed by "+orSomeone(who), who
	if err := d.changeLocked(g); err != nil {
		return Goal{}, err
	}
	d.backoff = 0
	d.startLocked()
	return d.snapshotLocked(), nil
}

func (d *goalDriver) clear(who string) (Goal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur.State == "" || d.cur.State == session.GoalCleared {
		return Goal{}, errs.New(NoGoal, fmt.Sprintf("session %q has no goal to clear", d.s.id))
	}
	return d.moveLocked(session.GoalCleared, "cleared by "+orSomeone(who), who)
}

// report is the model's goal_status call.
func (d *goalDriver) report(status, reason string) (Goal, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cur.State != session.GoalActive {
		return Goal{}, errs.New(GoalConflict, fmt.Sprintf("the goal is %s, not active; nothing to report", orNone(string(d.cur.State))))
	}
	st := session.GoalComplete
	if status == "blocked" {
		st = session.GoalBlocked
	}
	return d.moveLocked(st, reason, "model")
}

func orSomeone(who string) string {
	if who == "" {
		return "a client of the session"
	}
	return who
}

func orEmpty(prefix, s string) string {
	if s == "" {
		return ""
	}
	return prefix + s
}

func orNone(s string) string {
	if s == "" {
		return "not set"
	}
	return s
}

// needLocked refuses an op the goal's state does not allow.
func (d *goalDriver) needLocked(op string, states ...session.GoalState) error {
	if d.cur.State == "" || d.cur.State == session.GoalCleared {
		return errs.New(NoGoal, fmt.Sprintf("session %q has no goal to %s; set one with /goal TEXT", d.s.id, op))
	}
	for _, st := range states {
		if d.cur.State == st {
			return nil
		}
	}
	return errs.New(GoalConflict, fmt.Sprintf("session %q: cannot %s a goal that is %s (%s); set a new goal instead", d.s.id, op, d.cur.State, d.cur.Reason))
}

// moveLocked records the goal in state st.
func (d *goalDriver) moveLocked(st session.GoalState, reason, by string) (Goal, error) {
	g := d.cur
	g.State, g.Reason, g.By = st, reason, by
	if err := d.changeLocked(g); err != nil {
		return Goal{}, err
	}
	return d.snapshotLocked(), nil
}

// changeLocked makes g the goal and hands its record to the agent's
// driver, which appends it (at once when idle, at the running turn's
// end otherwise); it wakes the drive goroutine to act on it.
func (d *goalDriver) changeLocked(g Goal) error {
	rec, ok := d.s.handle.Agent.(goalRecorder)
	if !ok {
		return errs.New(errs.Internal, fmt.Sprintf("session %q: its agent cannot record a goal in its log", d.s.id))
	}
	d.countLocked()
	if g.ID == d.cnt.id {
		g.Spent = d.cnt.spent(time.Now())
	}
	// The first goal of the session is counted from its record on: the
	// log's length is read before the agent may append the record.
	from := int64(d.s.handle.Agent.Session().Len()) + 1
	ev := session.Event{Type: session.GoalRecorded, Goal: &g}
	if err := rec.RecordEvent(ev); err != nil {
		if errs.HasCode(err, agents.AgentDisposed) {
			return closedErr(d.s.id)
		}
		return err
	}
	if d.cnt.next == 0 {
		d.cnt.next = from
	}
	d.cur = g
	select {
	case d.wake <- struct{}{}:
	default:
	}
	return nil
}

func (d *goalDriver) startLocked() {
	if d.running || d.closed {
		return
	}
	d.running = true
	d.wg.Add(1)
	go d.run()
}

// close stops the drive and unmounts the tool: the session is closing.
func (d *goalDriver) close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel()
	d.wg.Wait()
	d.syncTool()
}

// run drives the goal while it is active: wait until the session is
// idle, check the budget, back off, send a continuation, wait for its
// turn.
func (d *goalDriver) run() {
	defer d.wg.Done()
	for {
		d.syncTool()
		d.mu.Lock()
		if d.cur.State != session.GoalActive || d.closed {
			d.running = false
			d.mu.Unlock()
			d.syncTool()
			return
		}
		d.mu.Unlock()
		if err := d.s.handle.Agent.WhenIdle(d.ctx); err != nil {
			d.stopRunning()
			return
		}
		d.mu.Lock()
		if d.cur.State != session.GoalActive {
			d.mu.Unlock()
			continue
		}
		d.countLocked()
		// A goal whose first record is not in the log yet spent nothing.
		if over := d.cnt.over(d.cur.Budget, time.Now()); over != "" && d.cnt.id == d.cur.ID {
			_, err := d.moveLocked(session.GoalBudgetLimited, over, "budget")
			d.mu.Unlock()
			if err != nil {
				d.stopRunning()
				return
			}
			continue
		}
		wait := d.backoff
		d.mu.Unlock()
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-d.ctx.Done():
				t.Stop()
				d.stopRunning()
				return
			case <-d.wake:
				// A change: look at the state again, then wait anew.
				t.Stop()
				continue
			case <-t.C:
			}
		}
		if !d.checkIn() {
			d.stopRunning()
			return
		}
	}
}

func (d *goalDriver) stopRunning() {
	d.mu.Lock()
	d.running = false
	d.mu.Unlock()
}

// checkIn sends one continuation and waits for its turn; false means the
// session is going away.
func (d *goalDriver) checkIn() bool {
	d.mu.Lock()
	if d.cur.State != session.GoalActive {
		d.mu.Unlock()
		return true
	}
	d.cur.CheckIns++
	g := d.snapshotLocked()
	calls := d.cnt.calls
	d.mu.Unlock()
	req := PromptRequest{RequestID: fmt.Sprintf("%s-%d", g.ID, g.CheckIns), Content: continuation(g), Source: goalSource(g.SetBy)}
	_, err := d.s.Prompt(d.ctx, req)
	if err != nil {
		if d.ctx.Err() != nil || errs.HasCode(err, Closed) {
			return false
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.cur.ID != g.ID || d.cur.State != session.GoalActive {
			return true
		}
		if r, ok := agentcontroller.RefusalOf(err); ok {
			_, err = d.moveLocked(session.GoalBlocked, fmt.Sprintf("admission refused the continuation (%s): %s", r.Reason, r.Message), "admission")
		} else {
			_, err = d.moveLocked(session.GoalPaused, "the continuation could not be sent: "+err.Error(), "goal")
		}
		return err == nil
	}
	res, err := d.s.Wait(d.ctx, req.RequestID)
	if err != nil {
		return d.ctx.Err() == nil && !errs.HasCode(err, Closed)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.countLocked()
	if cancelled := res.Outcome == FateDropped || (res.End != nil && res.End.Reason == EndAborted); cancelled &&
		d.cur.ID == g.ID && d.cur.State == session.GoalActive {
		// Someone stopped the goal's work: stop sending more until a
		// person resumes it.
		by := res.By
		_, err := d.moveLocked(session.GoalPaused, "its turn was cancelled"+orEmpty(" by ", by)+"; resume it to go on", by)
		return err == nil
	}
	if d.cnt.calls > calls && (res.End == nil || res.End.Error == "") {
		// The model acted: check in again at once.
		d.backoff = 0
	} else {
		d.backoff = min(max(2*d.backoff, d.opts.MinBackoff), d.opts.MaxBackoff)
	}
	return true
}

// continuation is the prompt of a check-in.
func continuation(g Goal) string {
	var b strings.Builder
	if g.CheckIns <= 1 {
		fmt.Fprintf(&b, "You have a goal to work toward across turns:\n\n%s\n\n", g.Objective)
	} else {
		fmt.Fprintf(&b, "Continue working toward your goal:\n\n%s\n\n", g.Objective)
	}
	if left := remaining(g); left != "" {
		fmt.Fprintf(&b, "Budget left: %s.\n", left)
	}
	b.WriteString("When the goal is achieved, call the goal_status tool with status \"complete\" and a short summary. " +
		"If you cannot make progress without help, call it with status \"blocked\" and say what you need. " +
		"Otherwise take the next step.")
	return b.String()
}

// remaining says what the goal may still spend.
func remaining(g Goal) string {
	var parts []string
	if b := g.Budget.Tokens; b > 0 {
		parts = append(parts, fmt.Sprintf("%d tokens", max(b-g.Spent.Tokens, 0)))
	}
	if b := g.Budget.Cost; b > 0 {
		parts = append(parts, fmt.Sprintf("%.4g in cost", max(b-g.Spent.Cost, 0)))
	}
	if b := g.Budget.Turns; b > 0 {
		parts = append(parts, fmt.Sprintf("%d turns", max(b-g.Spent.Turns, 0)))
	}
	if b := g.Budget.Time; b > 0 {
		parts = append(parts, (max(time.Duration(b-g.Spent.Time), 0)).Round(time.Second).String()+" of wall time")
	}
	return strings.Join(parts, ", ")
}

// goalCount counts what the goal of id spent from the log: the tokens and
// cost of the model requests and the turns that ended while it was
// active, and the wall time it was active. The same fold runs over a
// resumed log and over each new event, so a restart counts alike.
type goalCount struct {
	pricing usage.Pricing
	// next is the seq of the next event to fold; 0 before any goal.
	next   int64
	id     string
	active bool
	// turnOn: the goal was active at some point of the turn running, so
	// the whole turn is the goal's — a goal the model completes inside
	// a turn is recorded there, before the turn's last answer and end.
	turnOn bool
	since  time.Time
	acc    *usage.Account
	turns  int
	calls  int
	time   time.Duration
	// checkIns is the highest check-in whose continuation the log holds
	// (by its request id): a resume numbers the next one after it, so its
	// request id is new and the agent controller delivers it.
	checkIns int
}

func (c *goalCount) add(e session.Event) {
	if e.Seq >= c.next {
		c.next = e.Seq + 1
	}
	switch {
	case e.Type == session.GoalRecorded && e.Goal != nil:
		if e.Goal.ID != c.id {
			*c = goalCount{pricing: c.pricing, next: c.next, id: e.Goal.ID, acc: usage.NewAccount(c.pricing, nil)}
		}
		on := e.Goal.State == session.GoalActive
		switch {
		case on && !c.active:
			c.since = e.Time
		case !on && c.active:
			c.time += e.Time.Sub(c.since)
		}
		c.active = on
		c.turnOn = c.turnOn || on
	case e.RequestID != "" && c.id != "" && strings.HasPrefix(e.RequestID, c.id+"-"):
		if n, err := strconv.Atoi(strings.TrimPrefix(e.RequestID, c.id+"-")); err == nil && n > c.checkIns {
			c.checkIns = n
		}
	case e.Type == session.TurnStart:
		c.turnOn = c.active
	case e.Type == session.TurnEnd:
		if c.turnOn || c.active {
			c.turns++
		}
		c.turnOn = false
	case !c.active && !c.turnOn:
	case usage.Counted(e):
		c.acc.Add(e)
	case e.Type == session.ToolCall:
		c.calls++
	}
}

func (c *goalCount) spent(now time.Time) session.GoalSpent {
	s := session.GoalSpent{Turns: c.turns, Time: session.Duration(c.time)}
	if c.active && !c.since.IsZero() {
		s.Time += session.Duration(now.Sub(c.since))
	}
	if c.acc != nil {
		t := c.acc.Session()
		s.Tokens = t.InputTokens + t.OutputTokens
		s.Cost, _ = t.Cost()
	}
	return s
}

// over says which bound of b the goal ran out of, or "".
func (c *goalCount) over(b session.GoalBudget, now time.Time) string {
	s := c.spent(now)
	switch {
	case b.Tokens > 0 && s.Tokens >= b.Tokens:
		return fmt.Sprintf("the token budget is spent: %d of %d tokens", s.Tokens, b.Tokens)
	case b.Turns > 0 && s.Turns >= b.Turns:
		return fmt.Sprintf("the turn budget is spent: %d of %d turns", s.Turns, b.Turns)
	case b.Time > 0 && s.Time >= b.Time:
		return fmt.Sprintf("the time budget is spent: %s of %s", time.Duration(s.Time).Round(time.Second), time.Duration(b.Time))
	case b.Cost > 0 && c.acc != nil:
		t := c.acc.Session()
		if _, known := t.Cost(); !known && t.Steps > 0 {
			// A cost bound the price table cannot check stops the goal
			// rather than let it spend without a bound.
			return fmt.Sprintf("the cost budget cannot be checked: the price table has no price for %s; add it under pricing:", strings.Join(orDefaultModel(t.Unpriced()), ", "))
		}
		if s.Cost >= b.Cost {
			return fmt.Sprintf("the cost budget is spent: %.4g of %.4g", s.Cost, b.Cost)
		}
	}
	return ""
}

func orDefaultModel(models []string) []string {
	if len(models) == 0 {
		return []string{"the models used (no pricing: key)"}
	}
	return models
}
