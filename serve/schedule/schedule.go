// Package schedule runs the cron entries of dsh serve (serve.schedules):
// at each scheduled time it renders the schedule's prompt and delivers it
// to the schedule's agent through the session controller, as an unattended
// source (kind schedule), so admission governs it and a tool call that
// needs approval is refused rather than left waiting.
//
// A run that comes while the previous run's turn still goes on is skipped
// or queued (overlap). The last scheduled time handled is kept in the
// state directory, so a restart knows which runs were due while dsh was
// down: they are reported, and replayed once only with catch_up.
package schedule

import (
	stdctx "context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/serve/unattended"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/robfig/cron/v3"
)

// Options configure the scheduler.
type Options struct {
	// Sessions is the session service the schedules deliver through: the host's
	// controller, or one that forwards to the host that runs a session.
	Sessions sessions.Service
	// Config holds the schedules (serve.schedules) and the default agent.
	Config *config.Config
	// StateDir keeps the last runs (serve.state_dir, resolved by the
	// caller); created 0700 when missing.
	StateDir string
	Log      *slog.Logger
	// Now and Timer are the clock; nil means the real one. Tests pass a
	// fake clock's: Timer returns a channel that receives once Now has
	// reached at, and a function that releases it.
	Now   func() time.Time
	Timer func(at time.Time) (<-chan time.Time, func())
	// Claim, when set, is asked before each run whether this host runs it:
	// hosts of a cluster share the schedules, and the one whose claim of a
	// schedule's time wins runs it, the others skip it. Nil runs every
	// run here (one host). A claim that fails skips the run: a run is
	// delivered at most once, as across a crash. See claim.go.
	Claim ClaimFunc
}

// maxWait bounds one wait of the loop, so a wall clock that jumps (a
// suspended laptop, an adjusted clock) is noticed within a minute.
const maxWait = time.Minute

// Scheduler runs the schedules.
type Scheduler struct {
	entries []*entry
	state   *state
	runner  *unattended.Runner
	log     *slog.Logger
	now     func() time.Time
	timer   func(time.Time) (<-chan time.Time, func())
	claim   ClaimFunc
	// claims ends the claims in flight when Stop begins.
	claims       stdctx.Context
	cancelClaims stdctx.CancelFunc

	stop     chan struct{} // closed by Stop
	loopDone chan struct{} // closed when the loop returns
	// runs counts the goroutines delivering and following runs.
	runs sync.WaitGroup

	mu      sync.Mutex
	started bool
	stopped bool
}

// entry is one schedule with its overlap state.
type entry struct {
	name    string
	sched   cron.Schedule
	prompt  *template.Template
	overlap string
	catchUp bool
	target  unattended.Target
	next    time.Time // owned by the loop

	mu      sync.Mutex
	running bool
	queued  *time.Time
}

// New prepares the schedules and reads their state; it starts nothing.
func New(o Options) (*Scheduler, error) {
	if o.Sessions == nil || o.Config == nil {
		return nil, errs.New(errs.InvalidArgument, "schedule.New: Options.Sessions and Options.Config are required")
	}
	st, err := openState(o.StateDir)
	if err != nil {
		return nil, err
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Scheduler{state: st, log: log, now: o.Now, timer: o.Timer, claim: o.Claim, stop: make(chan struct{}), loopDone: make(chan struct{})}
	s.claims, s.cancelClaims = stdctx.WithCancel(stdctx.Background())
	if s.now == nil {
		s.now = time.Now
	}
	if s.timer == nil {
		s.timer = realTimer
	}
	for i, sc := range o.Config.Serve.Schedules {
		e, err := prepare(o.Config, i, sc)
		if err != nil {
			s.cancelClaims()
			return nil, err
		}
		if s.claim != nil {
			e.sched = aligned(e.sched)
		}
		s.entries = append(s.entries, e)
	}
	s.runner = unattended.New(o.Sessions, log)
	return s, nil
}

func prepare(cfg *config.Config, i int, sc config.ScheduleConfig) (*entry, error) {
	at := fmt.Sprintf("serve.schedules[%d]", i)
	if sc.Name == "" {
		return nil, errs.New(errs.InvalidArgument, at+": the schedule has no name")
	}
	if sc.Tenant != "" {
		if err := session.CheckTenant(sc.Tenant); err != nil {
			return nil, errs.New(errs.InvalidArgument, fmt.Sprintf("schedule %q (%s): tenant %q cannot be used: %v; name it with at most %d printable characters", sc.Name, at, sc.Tenant, err, session.MaxTenantLen))
		}
	}
	sched, err := config.CronParser.Parse(sc.Cron)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("schedule %q (%s): cron %q does not parse", sc.Name, at, sc.Cron))
	}
	agent, ok := cfg.ServeAgent(sc.Agent)
	if !ok {
		return nil, errs.New(errs.InvalidArgument, fmt.Sprintf(
			"schedule %q (%s): no agent %q to deliver to; configured agents: %s", sc.Name, at, agent, strings.Join(cfg.AgentIDs(), ", ")))
	}
	tmpl, err := template.New(at + ".prompt").Option("missingkey=zero").Parse(sc.Prompt)
	if err != nil {
		return nil, errs.Wrap(errs.InvalidArgument, err, fmt.Sprintf("schedule %q (%s): the prompt is not a valid text/template", sc.Name, at))
	}
	overlap := sc.Overlap
	if overlap == "" {
		overlap = config.OverlapSkip
	}
	return &entry{
		name: sc.Name, sched: sched, prompt: tmpl, overlap: overlap, catchUp: sc.CatchUp,
		target: unattended.Target{Agent: agent, Presets: sc.Presets, Session: sc.Session,
			Source: sessions.Source{Kind: sessions.SourceSchedule, RPCID: "schedule:" + sc.Name, Entry: "schedule",
				Principal: sessions.Principal{Kind: "schedule", ID: sc.Name, Tenant: sc.Tenant}}},
	}, nil
}

func realTimer(at time.Time) (<-chan time.Time, func()) {
	t := time.NewTimer(time.Until(at))
	return t.C, func() { t.Stop() }
}

// Start looks for the runs missed while dsh was down, then runs the
// schedules until Stop. Calling it again does nothing.
func (s *Scheduler) Start() {
	s.mu.Lock()
	if s.started || s.stopped {
		s.mu.Unlock()
		return
	}
	s.started = true
	s.mu.Unlock()
	now := s.now()
	for _, e := range s.entries {
		s.resume(e, now)
		e.next = e.sched.Next(now)
	}
	go s.loop()
}

// resume handles what a schedule missed before now: a first start has
// nothing to miss; otherwise the runs due since its last handled time are
// logged, and with catch_up the latest of them runs once.
//
// A run that was pending — recorded to be delivered, its turn not ended —
// when dsh stopped was cut by a crash: it may have waited in memory (in
// the overlap queue, or in the agent's inbox before its turn's first
// checkpoint) and be in no log. With catch_up the latest pending run is
// delivered again under its request id, unless a run missed later is due:
// the session answers from its log when it took the run, so it runs once.
func (s *Scheduler) resume(e *entry, now time.Time) {
	last, ok := s.state.last(e.name)
	if !ok {
		s.record(e, now)
		return
	}
	due, missed := latestDue(e.sched, e.sched.Next(last), now)
	var cut time.Time
	if pending := s.state.pending(e.name); len(pending) > 0 {
		cut = pending[len(pending)-1]
		if !e.catchUp || missed > 0 {
			if !e.catchUp {
				s.log.Warn("schedule runs were cut by a crash before their turns ended; not delivered again (set catch_up: true to deliver the latest once at start)",
					"schedule", e.name, "cut", len(pending), "latest", cut)
			}
			s.settle(e, time.Time{})
			cut = time.Time{}
		}
	}
	if !cut.IsZero() {
		s.log.Info("a schedule run was cut by a crash before its turn ended; delivering it again (its session answers from its log if it took it)",
			"schedule", e.name, "time", cut, "request_id", RequestID(e.name, cut))
		s.settle(e, cut.Add(-time.Nanosecond))
		s.startAgain(e, cut)
		return
	}
	if missed == 0 {
		return
	}
	if !e.catchUp {
		msg := "schedule runs were due while dsh was down; not replayed (set catch_up: true to run once at start)"
		if s.claim != nil {
			msg = "schedule runs were due while this host was down; the cluster's other hosts ran those they claimed, and this one replays none (set catch_up: true to run the latest once, if no host ran it)"
		}
		s.log.Warn(msg, "schedule", e.name, "missed", missed, "latest", due)
		s.record(e, due)
		return
	}
	s.log.Info("schedule runs were due while dsh was down; catching up once", "schedule", e.name, "missed", missed, "time", due)
	s.fire(e, due)
}

// latestDue returns the latest scheduled time from first on that is not
// after now, and how many there are from first to it; zero when first is
// after now. Counting stops at maxCounted (a schedule every minute, down
// for a month, has "at least maxCounted" missed runs), and the latest is
// then found by looking back from now.
func latestDue(sched cron.Schedule, first, now time.Time) (time.Time, int) {
	if first.IsZero() || first.After(now) {
		return time.Time{}, 0
	}
	due, n := first, 1
	for t := sched.Next(first); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		due, n = t, n+1
		if n == maxCounted {
			return lookBack(sched, due, now), n
		}
	}
	return due, n
}

// lookBack finds the latest scheduled time in [floor, now] in doubling
// windows back from now: the first window that holds one holds the latest
// a few steps from its start.
func lookBack(sched cron.Schedule, floor, now time.Time) time.Time {
	if every, ok := sched.(cron.ConstantDelaySchedule); ok && every.Delay > 0 {
		// @every runs a fixed delay after the previous run: stay on that
		// series rather than on a window's start.
		return floor.Add(now.Sub(floor) / every.Delay * every.Delay)
	}
	for window := time.Second; ; window *= 2 {
		from := now.Add(-window)
		if !from.After(floor) {
			from = floor
		}
		due := floor
		for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
			due = t
		}
		if due.After(floor) || from.Equal(floor) {
			return due
		}
	}
}

// maxCounted bounds the count of missed runs.
const maxCounted = 1000

// loop waits for the earliest next run and fires what is due.
func (s *Scheduler) loop() {
	defer close(s.loopDone)
	if len(s.entries) == 0 {
		<-s.stop
		return
	}
	for {
		wake := s.now().Add(maxWait)
		for _, e := range s.entries {
			if !e.next.IsZero() && e.next.Before(wake) {
				wake = e.next
			}
		}
		c, release := s.timer(wake)
		select {
		case <-s.stop:
			release()
			return
		case <-c:
		}
		release()
		now := s.now()
		for _, e := range s.entries {
			if e.next.IsZero() || e.next.After(now) {
				continue
			}
			due, n := latestDue(e.sched, e.next, now)
			if n > 1 {
				s.log.Warn("several runs of a schedule came due at once (the clock jumped or the machine slept); running the latest once",
					"schedule", e.name, "due", n, "time", due)
			}
			e.next = e.sched.Next(due)
			s.fire(e, due)
		}
	}
}

// record keeps t as e's last handled time; a failure is logged, since
// the schedule itself still runs (only a restart would misjudge).
func (s *Scheduler) record(e *entry, t time.Time) {
	if err := s.state.record(e.name, t); err != nil {
		s.log.Error("the schedule's last run could not be saved; a restart may report it as missed", "schedule", e.name, "error", err)
	}
}

// settle forgets e's pending runs at or before t (all for zero t); a
// failure is logged: the next start may deliver such a run again, and
// its session answers from its log.
func (s *Scheduler) settle(e *entry, t time.Time) {
	if err := s.state.settle(e.name, t); err != nil {
		s.log.Error("the schedule's pending runs could not be saved; a restart may deliver one again", "schedule", e.name, "error", err)
	}
}

// mark records t as a pending run of e; a failure is logged, and the run
// still runs (a crash before its turn's first checkpoint would lose it).
func (s *Scheduler) mark(e *entry, t time.Time) {
	if err := s.state.mark(e.name, t); err != nil {
		s.log.Error("the schedule's run could not be saved as pending; a crash before its turn is recorded loses it", "schedule", e.name, "time", t, "error", err)
	}
}

// fire handles a run due at t: it is recorded first (a run is claimed and
// decided once, even across a crash), then started, queued or skipped.
func (s *Scheduler) fire(e *entry, t time.Time) {
	s.record(e, t)
	if !s.claimed(e, t) {
		return
	}
	s.start(e, t)
}

// startAgain starts a run a crash cut, at start: no other run is going
// on yet. Its session may still be held by the process that died
// (session.nats keeps its lease until lease_ttl runs out), so its delivery
// is tried again while the failure names no outcome.
func (s *Scheduler) startAgain(e *entry, t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !s.spawn() {
		return
	}
	e.running = true
	go s.run(e, t, true)
}

// start runs, queues or skips e's run due at t. A run that runs or waits
// is marked pending first, until its turn ends.
func (s *Scheduler) start(e *entry, t time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.running {
		if e.overlap == config.OverlapQueue && e.queued == nil {
			s.mark(e, t)
			e.queued = &t
			s.log.Info("schedule run queued: the previous run's turn still runs", "schedule", e.name, "time", t)
			return
		}
		why := "the previous run's turn still runs (overlap: skip)"
		if e.overlap == config.OverlapQueue {
			why = "the previous run's turn still runs and a run already waits (overlap: queue)"
		}
		s.log.Warn("schedule run skipped: "+why, "schedule", e.name, "time", t)
		return
	}
	if !s.spawn() {
		return
	}
	s.mark(e, t)
	e.running = true
	go s.run(e, t, false)
}

// spawn counts a run goroutine in, unless Stop began.
func (s *Scheduler) spawn() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.runs.Add(1)
	return true
}

// run delivers the run due at t, waits for its turn and then runs the one
// queued meanwhile, if any.
func (s *Scheduler) run(e *entry, t time.Time, again bool) {
	defer s.runs.Done()
	for {
		retry := s.deliver(e, t)
		for wait := retryBackoff; retry && again; wait = min(2*wait, maxRetryBackoff) {
			select {
			case <-s.stop:
				// Stopped before the session took it: it stays pending
				// for the next start.
				return
			case <-time.After(wait):
			}
			retry = s.deliver(e, t)
		}
		again = false
		// Its turn ended, or it was refused, or it failed: it had its
		// one delivery. Only a crash leaves a run pending.
		s.settle(e, t)
		e.mu.Lock()
		queued := e.queued
		e.queued = nil
		e.running = queued != nil
		e.mu.Unlock()
		// Logged once the next run may start: tests wait for it.
		s.log.Info("schedule run ended", "schedule", e.name, "time", t)
		if queued == nil {
			return
		}
		t = *queued
	}
}

// RequestID is the request id of the run of schedule name due at t: the
// same for every attempt, so a session that already took the run (a
// persisted one, after a restart) does not take it again.
func RequestID(name string, t time.Time) string {
	return "schedule:" + name + ":" + t.UTC().Format(time.RFC3339)
}

// OwnSessionID is the session of the run of schedule name due at t when
// the schedule names no session: schedule-<name>-<time, UTC>, or, for a
// name a session id cannot hold, schedule-<digest of the request id>.
func OwnSessionID(name string, t time.Time) string {
	id := "schedule-" + name + "-" + t.UTC().Format("20060102T150405Z")
	if session.ValidID(id) {
		return id
	}
	sum := sha256.Sum256([]byte(RequestID(name, t)))
	return "schedule-" + hex.EncodeToString(sum[:16])
}

// Run is what a schedule's prompt template sees.
type Run struct {
	Name string
	// Time is the scheduled time of the run (in the schedule's CRON_TZ,
	// else local time).
	Time time.Time
}

// retryBackoff and maxRetryBackoff space the tries of a run a crash cut
// whose session cannot take it yet.
const (
	retryBackoff    = 250 * time.Millisecond
	maxRetryBackoff = 10 * time.Second
)

// deliver delivers the run due at t and waits for its turn to end. It
// reports whether the delivery failed without an outcome and may be
// tried again (the session was held elsewhere, say).
func (s *Scheduler) deliver(e *entry, t time.Time) (retry bool) {
	id := RequestID(e.name, t)
	var prompt strings.Builder
	if err := e.prompt.Execute(&prompt, Run{Name: e.name, Time: t}); err != nil || strings.TrimSpace(prompt.String()) == "" {
		if err == nil {
			err = errors.New("it rendered nothing")
		}
		s.log.Error("the schedule's prompt template failed; the run is not delivered", "schedule", e.name, "request_id", id, "error", err)
		return
	}
	target := e.target
	if target.Session == "" {
		// The run's own session is named by the run, so a run delivered
		// again after a crash finds the session that took it, and its
		// request id there, and runs nothing twice.
		target.Own = OwnSessionID(e.name, t)
	}
	d, err := s.runner.Deliver(stdctx.Background(), target, sessions.PromptRequest{RequestID: id, Content: prompt.String()})
	if err != nil {
		// A catch-up of a run already decided is answered from its record:
		// the outcome says refused, expired or dropped, and nothing ran.
		s.log.Warn("the schedule's run was not delivered", "schedule", e.name, "request_id", id,
			"outcome", sessions.FateOf(err), "code", errs.CodeOf(err), "reason", errs.ReasonOf(err), "error", err)
		// A run whose request id the session holds for other text (the
		// prompt was edited before a catch-up) never will take it.
		return sessions.FateOf(err) == "" && !errs.HasCode(err, unattended.Closed) && !errs.HasCode(err, sessions.RequestIDReused)
	}
	s.log.Info("schedule run delivered", "schedule", e.name, "request_id", id, "session", d.Session, "message_id", d.MessageID)
	<-d.Done
	return false
}

// Stop ends the loop, then waits for the runs' turns; when ctx ends first
// they are cancelled, and Stop still returns only once their sessions are
// closed and no goroutine of the scheduler is left.
func (s *Scheduler) Stop(ctx stdctx.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.stopped = true
	started := s.started
	s.mu.Unlock()
	s.cancelClaims()
	close(s.stop)
	if started {
		<-s.loopDone
	}
	err := s.runner.Close(ctx)
	s.runs.Wait()
	return err
}
