package schedule

import (
	stdctx "context"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/robfig/cron/v3"
)

// ClaimFunc asks the hosts sharing the schedules whether this one runs
// the run of schedule name due at at. It returns true for exactly one of
// the hosts that ask about the same name and time (and for none that asks
// about a time at or before one already claimed). cluster.Fires.Claim is
// one, over a JetStream key-value bucket.
type ClaimFunc func(ctx stdctx.Context, name string, at time.Time) (bool, error)

// claimTimeout bounds one claim, so an unreachable engine delays the
// loop's other schedules by at most this much per run.
const claimTimeout = 10 * time.Second

// claimed reports whether this host runs e's run due at t: always without
// a claim function. A claim that fails is logged and the run skipped
// here; another host may still take it.
func (s *Scheduler) claimed(e *entry, t time.Time) bool {
	if s.claim == nil {
		return true
	}
	ctx, cancel := stdctx.WithTimeout(s.claims, claimTimeout)
	defer cancel()
	ok, err := s.claim(ctx, e.name, t)
	switch {
	case err != nil:
		s.log.Error("the schedule's run could not be claimed among the cluster's hosts; it is not run here (a run is delivered at most once)",
			"schedule", e.name, "time", t, "request_id", RequestID(e.name, t), "code", errs.CodeOf(err), "error", err)
		return false
	case !ok:
		s.log.Info("schedule run taken by another host", "schedule", e.name, "time", t, "request_id", RequestID(e.name, t))
		return false
	}
	return true
}

// aligned puts an @every schedule on a grid every host shares. Alone,
// @every counts from the start of dsh; hosts started at different times
// would then each have their own series of times, and no two would claim
// the same one. On the grid (multiples of the delay since Go's zero time)
// they agree. Cron expressions name wall-clock times already.
func aligned(sched cron.Schedule) cron.Schedule {
	if every, ok := sched.(cron.ConstantDelaySchedule); ok && every.Delay > 0 {
		return grid{every.Delay}
	}
	return sched
}

type grid struct{ every time.Duration }

// Next returns the first multiple of the delay after t.
func (g grid) Next(t time.Time) time.Time { return t.Truncate(g.every).Add(g.every) }
