package schedule_test

import (
	stdctx "context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testtools"
	"github.com/dsh-go/dsh/serve/schedule"
	"github.com/dsh-go/dsh/services/session"
)

const quarterly = `serve:
  schedules:
    - name: quarter
      cron: "*/15 * * * *"
      session: sched-q
      prompt: "{{.Name}} at {{.Time.Format \"15:04\"}}"
`

func TestRunsFireAtTheirScheduledTimes(t *testing.T) {
	e := newEnv(t, "", quarterly)
	e.start()
	e.clock.set(at("09:59"))
	e.clock.set(at("10:00"))
	e.waitPrompts("sched-q", "quarter at 10:00")
	e.waitLog("schedule run ended", "time=2026-03-02 10:00")
	e.clock.set(at("10:14"))
	e.clock.set(at("10:15"))
	e.waitPrompts("sched-q", "quarter at 10:00", "quarter at 10:15")
	var ids []string
	for _, ev := range e.events("sched-q") {
		if ev.Type == session.UserMessage {
			ids = append(ids, ev.RequestID)
		}
	}
	want := []string{schedule.RequestID("quarter", at("10:00")), schedule.RequestID("quarter", at("10:15"))}
	if strings.Join(ids, " ") != strings.Join(want, " ") || want[0] != "schedule:quarter:2026-03-02T10:00:00Z" {
		t.Fatalf("request ids %q; want %q", ids, want)
	}
}

func TestAnOverlappingRunIsSkipped(t *testing.T) {
	e := newEnv(t, `[{tool_calls: [{name: block, arguments: "{}"}]}, {text: done}]`, quarterly)
	e.start()
	e.clock.set(at("10:00"))
	<-testtools.BlockStarted()
	e.clock.set(at("10:15"))
	e.waitLog("schedule run skipped", "overlap: skip", "time=2026-03-02 10:15")
	testtools.ReleaseBlock()
	e.waitLog("schedule run ended", "time=2026-03-02 10:00")
	e.clock.set(at("10:30"))
	e.waitPrompts("sched-q", "quarter at 10:00", "quarter at 10:30")
}

func TestAnOverlappingRunIsQueuedOnce(t *testing.T) {
	e := newEnv(t, `[{tool_calls: [{name: block, arguments: "{}"}]}, {text: done}]`,
		strings.Replace(quarterly, "session: sched-q", "session: sched-q\n      overlap: queue", 1))
	e.start()
	e.clock.set(at("10:00"))
	<-testtools.BlockStarted()
	e.clock.set(at("10:15"))
	e.waitLog("schedule run queued", "time=2026-03-02 10:15")
	e.clock.set(at("10:30"))
	e.waitLog("schedule run skipped", "a run already waits", "time=2026-03-02 10:30")
	if got := e.prompts("sched-q"); len(got) != 1 {
		t.Fatalf("prompts %q while the first turn runs; the queued run must wait for it", got)
	}
	testtools.ReleaseBlock()
	e.waitPrompts("sched-q", "quarter at 10:00", "quarter at 10:15")
	e.waitLog("schedule run ended", "time=2026-03-02 10:15")
	e.clock.set(at("10:45"))
	e.waitPrompts("sched-q", "quarter at 10:00", "quarter at 10:15", "quarter at 10:45")
}

const hourly = `serve:
  schedules:
    - {name: lazy, cron: "0 * * * *", session: sched-lazy, prompt: "{{.Name}} {{.Time.Format \"15:04\"}}"}
    - {name: eager, cron: "0 * * * *", session: sched-eager, prompt: "{{.Name}} {{.Time.Format \"15:04\"}}", catch_up: true}
`

func TestMissedRunsAreReplayedOnlyWithCatchUp(t *testing.T) {
	e := newEnv(t, "", hourly)
	// A first start has nothing to catch up on: it runs from now on.
	first := e.start()
	e.clock.set(at("10:00"))
	e.waitPrompts("sched-lazy", "lazy 10:00")
	e.waitPrompts("sched-eager", "eager 10:00")
	e.waitLog("schedule run ended", "schedule=lazy")
	e.waitLog("schedule run ended", "schedule=eager")
	if err := first.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(e.state, schedule.StateFile))
	if err != nil || !strings.Contains(string(raw), `"lazy"`) || !strings.Contains(string(raw), "2026-03-02T10:00:00Z") {
		t.Fatalf("state file: %s (%v)", raw, err)
	}
	if fi, err := os.Stat(e.state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v %v; want mode 0700", fi.Mode(), err)
	}

	// dsh was down from 10:00 to 12:30: 11:00 and 12:00 were missed.
	e.clock.set(at("12:30"))
	second := e.start()
	e.waitLog("not replayed", "schedule=lazy", "missed=2")
	e.waitPrompts("sched-eager", "eager 10:00", "eager 12:00")
	if err := second.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.prompts("sched-lazy"); len(got) != 1 {
		t.Fatalf("lazy received %q; missed runs must not be replayed without catch_up", got)
	}

	// Restarted again at once: the catch-up is not run a second time.
	third := e.start()
	if err := third.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.prompts("sched-eager"); len(got) != 2 {
		t.Fatalf("eager received %q after a second restart; want the catch-up once", got)
	}
	if n := e.logs.count("catching up"); n != 1 {
		t.Fatalf("caught up %d times; want once", n)
	}
}

func TestARunWithoutSessionGetsItsOwnClosedAfterwards(t *testing.T) {
	e := newEnv(t, "", "serve:\n  schedules:\n    - {name: own, cron: \"@hourly\", prompt: \"tick {{.Time.Format \\\"15:04\\\"}}\"}\n")
	e.start()
	e.clock.set(at("10:00"))
	e.waitLog("schedule run ended", "schedule=own")
	var id string
	for _, s := range mustList(t, e) {
		// Named by the run, so a run delivered again after a crash finds it.
		if s.ID == schedule.OwnSessionID("own", at("10:00")) {
			id = s.ID
			if s.Turns != 1 || s.State == session.StateOpen {
				t.Fatalf("the run's session: %+v; want one turn, closed", s)
			}
		}
	}
	if id == "" {
		t.Fatalf("no session of the run was persisted: %v", mustList(t, e))
	}
}

func mustList(t *testing.T, e *env) []session.Summary {
	t.Helper()
	list, err := e.h.Sessions().List(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func TestARefusedRunIsLoggedAndNotDelivered(t *testing.T) {
	// The ready gate refuses an unattended message to an agent nobody
	// reported ready, at once.
	e := newEnvWith(t, "", "  - use: admission.ready-gate\n", quarterly)
	e.start()
	e.clock.set(at("10:00"))
	e.waitLog("not delivered", "schedule=quarter", "reason=admission/not-ready")
	e.waitLog("schedule run ended", "schedule=quarter")
	if got := e.prompts("sched-q"); len(got) != 0 {
		t.Fatalf("a refused run reached the session: %q", got)
	}
}

func TestAToolNeedingApprovalIsRefusedInAScheduledTurn(t *testing.T) {
	testtools.Risky.Store(0)
	e := newEnv(t, `[{tool_calls: [{name: risky, arguments: "{}"}]}, {text: done}]`, quarterly)
	e.start()
	e.clock.set(at("10:00"))
	e.waitLog("schedule run ended", "schedule=quarter")
	var results []string
	for _, ev := range e.events("sched-q") {
		if ev.Type == session.ToolResult {
			results = append(results, ev.Message.Content)
		}
	}
	if len(results) != 1 || !strings.Contains(results[0], "unattended source") || testtools.Risky.Load() != 0 {
		t.Fatalf("tool results %q, runs %d; want the call refused as unattended, never run", results, testtools.Risky.Load())
	}
}

func TestStopCancelsARunStillGoingAtItsDeadline(t *testing.T) {
	e := newEnv(t, `[{tool_calls: [{name: block, arguments: "{}"}]}, {text: done}]`, "serve:\n  schedules:\n    - {name: slow, cron: \"@hourly\", prompt: go}\n")
	s := e.start()
	e.clock.set(at("10:00"))
	<-testtools.BlockStarted()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.Stop(ctx); err == nil {
		t.Fatal("Stop returned nil though a turn ran past its deadline")
	}
	for _, open := range e.h.Sessions().Sessions() {
		t.Fatalf("session %q is still open after Stop", open.ID())
	}
}

func TestNewRefusesABadStateDir(t *testing.T) {
	e := newEnv(t, "", quarterly)
	if _, err := schedule.New(schedule.Options{Sessions: e.h.Sessions(), Config: e.cfg}); err == nil || !strings.Contains(err.Error(), "StateDir") {
		t.Fatalf("New without a state dir: %v", err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, schedule.StateFile), []byte("{not json"), 0o600)
	_, err := schedule.New(schedule.Options{Sessions: e.h.Sessions(), Config: e.cfg, StateDir: dir, Log: slog.New(e.logs)})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, schedule.StateFile)) || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("New over a corrupt state file: %v", err)
	}
}

func TestAnIntervalScheduleAndAClockJump(t *testing.T) {
	e := newEnv(t, "", "serve:\n  schedules:\n    - {name: every, cron: \"@every 10m\", session: sched-e, prompt: \"every {{.Time.Format \\\"15:04\\\"}}\"}\n")
	e.start() // at 09:58: runs at 10:08, 10:18, ...
	e.clock.set(at("10:08"))
	e.waitPrompts("sched-e", "every 10:08")
	e.waitLog("schedule run ended", "time=2026-03-02 10:08")
	// The machine slept through 10:18 ... 10:58: the latest runs, once.
	e.clock.set(at("11:00"))
	e.waitPrompts("sched-e", "every 10:08", "every 10:58")
	e.waitLog("several runs of a schedule came due at once", "due=5")
	e.waitLog("schedule run ended", "time=2026-03-02 10:58")
	e.clock.set(at("11:08"))
	e.waitPrompts("sched-e", "every 10:08", "every 10:58", "every 11:08")
}

func TestStopWithoutStartAndTwice(t *testing.T) {
	e := newEnv(t, "", quarterly)
	s, err := schedule.New(schedule.Options{Sessions: e.h.Sessions(), Config: e.cfg, StateDir: e.state, Now: e.clock.Now, Timer: e.clock.Timer})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	s.Start() // after Stop: runs nothing
	e.clock.set(at("10:00"))
	if err := s.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.prompts("sched-q"); len(got) != 0 {
		t.Fatalf("a stopped scheduler delivered %q", got)
	}
}

// TestARunIsItsSchedulesPrincipal: a run's prompt names its schedule as
// principal through the schedule entry point, which a policy can refuse
// by name; the log keeps the provenance of a run it let through.
func TestARunIsItsSchedulesPrincipal(t *testing.T) {
	e := newEnvWith(t, "", `  - use: policy.cel
    config:
      admission:
        - name: quiet-quarter
          when: source.entry == "schedule" && source.principal.kind == "schedule" && source.principal.id == "quarter" && request.content.endsWith("10:15")
          action: refuse
          message: not at a quarter past
`, quarterly)
	e.start()
	e.clock.set(at("10:00"))
	e.waitPrompts("sched-q", "quarter at 10:00")
	e.waitLog("schedule run ended", "time=2026-03-02 10:00")
	e.clock.set(at("10:14"))
	e.clock.set(at("10:15"))
	e.waitLog("not delivered", "schedule=quarter", "reason=policy/quiet-quarter")
	evs, err := e.h.Sessions().History(stdctx.Background(), "sched-q", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == session.UserMessage {
			if f := ev.Message.From; f == nil || f.Entry != "schedule" || f.Principal.Kind != "schedule" || f.Principal.ID != "quarter" {
				t.Fatalf("the run's prompt came from %+v", f)
			}
		}
	}
}
