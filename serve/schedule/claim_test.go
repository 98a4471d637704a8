package schedule_test

import (
	stdctx "context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/serve/schedule"
)

const every10s = `serve:
  schedules:
    - name: ten
      cron: "@every 10s"
      session: sched-t
      prompt: "ten {{.Time.Format \"15:04:05\"}}"
`

// claims is a claim function that lets the first asker of each time run
// it, recording who asked about what.
type claims struct {
	mu    sync.Mutex
	asked map[string][]time.Time
	won   map[time.Time]string
}

func (c *claims) claimFor(host string) schedule.ClaimFunc {
	return func(_ stdctx.Context, _ string, at time.Time) (bool, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.asked[host] = append(c.asked[host], at)
		if _, ok := c.won[at]; ok {
			return false, nil
		}
		c.won[at] = host
		return true, nil
	}
}

func (c *claims) of(host string) []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.asked[host]...)
}

// startClaiming starts a scheduler on its own clock and state, claiming
// through claim.
func (e *env) startClaiming(clock *clock, state string, claim schedule.ClaimFunc) {
	e.t.Helper()
	s, err := schedule.New(schedule.Options{Sessions: e.h.Sessions(), Config: e.cfg, StateDir: state,
		Log: slog.New(e.logs), Now: clock.Now, Timer: clock.Timer, Claim: claim})
	if err != nil {
		e.t.Fatal(err)
	}
	s.Start()
	e.t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), wait)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			e.t.Error(err)
		}
	})
}

// Hosts started at different times agree on an @every schedule's times
// when they claim them: alone, each would count from its own start and
// never ask about the same time as another.
func TestClaimingHostsShareTheTimesOfAnEverySchedule(t *testing.T) {
	e := newEnv(t, "", every10s)
	c := &claims{asked: map[string][]time.Time{}, won: map[time.Time]string{}}
	start := at("09:58")
	clockA, clockB := newClock(start.Add(3*time.Second)), newClock(start.Add(7*time.Second))
	e.startClaiming(clockA, t.TempDir(), c.claimFor("a"))
	e.startClaiming(clockB, t.TempDir(), c.claimFor("b"))
	for _, step := range []time.Duration{10 * time.Second, 20 * time.Second} {
		clockA.set(start.Add(step))
		clockB.set(start.Add(step))
		waitUntil(t, "both hosts asked about "+start.Add(step).Format(time.TimeOnly), func() bool {
			return len(c.of("a")) == int(step/(10*time.Second)) && len(c.of("b")) == int(step/(10*time.Second))
		})
		// The next time comes once this run's turn ended, so the host
		// that wins it does not skip it as an overlap.
		e.waitLog("schedule run ended", "time="+start.Add(step).Format("2006-01-02 15:04:05"))
	}
	want := []time.Time{start.Add(10 * time.Second), start.Add(20 * time.Second)}
	for _, h := range []string{"a", "b"} {
		if got := c.of(h); !got[0].Equal(want[0]) || !got[1].Equal(want[1]) {
			t.Errorf("host %s asked about %v; want %v", h, got, want)
		}
	}
	e.waitPrompts("sched-t", "ten 09:58:10", "ten 09:58:20")
}

// A claim that fails skips the run on this host: delivered at most once.
func TestARunWhoseClaimFailsIsSkipped(t *testing.T) {
	e := newEnv(t, "", quarterly)
	fail := true
	var mu sync.Mutex
	claim := func(stdctx.Context, string, time.Time) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			return false, errors.New("engine down")
		}
		return true, nil
	}
	e.startClaiming(e.clock, e.state, claim)
	e.clock.set(at("10:00"))
	e.waitLog("could not be claimed", "time=2026-03-02 10:00", "engine down")
	mu.Lock()
	fail = false
	mu.Unlock()
	e.clock.set(at("10:15"))
	e.waitPrompts("sched-q", "quarter at 10:15")
}
