package schedule_test

import (
	stdctx "context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/serve/schedule"
)

const cut = `serve:
  schedules:
    - {name: lazy, cron: "0 * * * *", session: sched-lazy, prompt: "{{.Name}} {{.Time.Format \"15:04\"}}"}
    - {name: eager, cron: "0 * * * *", session: sched-eager, prompt: "{{.Name}} {{.Time.Format \"15:04\"}}", catch_up: true}
    - {name: own, cron: "0 * * * *", prompt: "{{.Name}} {{.Time.Format \"15:04\"}}", catch_up: true}
`

// crashState writes the state a crash leaves: every schedule's last run
// at last, and the runs pending (recorded to be delivered, turn not ended).
func crashState(t *testing.T, dir string, last time.Time, pending ...time.Time) {
	t.Helper()
	type one struct {
		Last    time.Time   `json:"last"`
		Pending []time.Time `json:"pending"`
	}
	doc := map[string]any{"version": 1, "schedules": map[string]one{
		"lazy": {last, pending}, "eager": {last, pending}, "own": {last, pending},
	}}
	raw, _ := json.Marshal(doc)
	if err := os.WriteFile(filepath.Join(dir, schedule.StateFile), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// ownTurns is the number of turns of the run's own session, 0 when none
// is stored.
func (e *env) ownTurns(t time.Time) int {
	for _, s := range mustList(e.t, e) {
		if s.ID == schedule.OwnSessionID("own", t) {
			return s.Turns
		}
	}
	return 0
}

// A run pending when dsh stopped — its turn had not ended, or it waited
// in the overlap queue and reached no log — is delivered again at start
// with catch_up, under its request id: once if no log holds it, not at
// all if its session took it. Without catch_up it is reported and dropped.
func TestARunCutByACrashIsDeliveredAgainOnlyWithCatchUp(t *testing.T) {
	e := newEnv(t, "", cut)
	first := e.start()
	e.clock.set(at("10:00"))
	for _, name := range []string{"lazy", "eager", "own"} {
		e.waitLog("schedule run ended", "schedule="+name)
	}
	if err := first.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if raw, _ := os.ReadFile(filepath.Join(e.state, schedule.StateFile)); strings.Contains(string(raw), "pending") {
		t.Fatalf("runs whose turns ended are still pending:\n%s", raw)
	}

	// The crash: 10:00 ran and its turn was cut; 11:00 came due and was
	// queued behind it, in memory only.
	crashState(t, e.state, at("11:00"), at("10:00"), at("11:00"))
	e.clock.set(at("11:30"))
	second := e.start()
	e.waitPrompts("sched-eager", "eager 10:00", "eager 11:00")
	e.waitLog("cut by a crash", "schedule=lazy")
	waitUntil(t, "the own run of 11:00 ran", func() bool { return e.ownTurns(at("11:00")) == 1 })
	if err := second.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.prompts("sched-lazy"); len(got) != 1 {
		t.Fatalf("without catch_up a cut run ran again: %q", got)
	}
	if n := e.ownTurns(at("10:00")); n != 1 {
		t.Fatalf("the own run of 10:00, older than the latest cut one, ran %d turns; want its first only", n)
	}
	if raw, _ := os.ReadFile(filepath.Join(e.state, schedule.StateFile)); strings.Contains(string(raw), "pending") {
		t.Fatalf("runs delivered again are still pending:\n%s", raw)
	}

	// A crash cut 11:00 again, after its sessions took it: delivered again,
	// it is answered from their logs and nothing runs.
	crashState(t, e.state, at("11:00"), at("11:00"))
	third := e.start()
	// Stop waits for the runs it started.
	if err := third.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"eager", "own"} {
		if n := e.logs.count("delivering it again", "schedule="+name); n != 2 {
			t.Fatalf("%s's cut run was delivered again %d times over two starts; want 2", name, n)
		}
	}
	if got := e.prompts("sched-eager"); len(got) != 2 {
		t.Fatalf("a run its session took ran again: %q", got)
	}
	if n := e.ownTurns(at("11:00")); n != 1 {
		t.Fatalf("the own run of 11:00 ran %d turns", n)
	}
}

// A run cut by a crash whose prompt was edited before the catch-up
// delivers other text under the run's request id: its session refuses it
// as a reused request id, and the scheduler gives the run up rather than
// trying it again and again.
func TestACutRunWhosePromptChangedIsGivenUp(t *testing.T) {
	e := newEnv(t, "", cut)
	first := e.start()
	e.clock.set(at("10:00"))
	e.waitLog("schedule run ended", "schedule=eager")
	if err := first.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	for i := range e.cfg.Serve.Schedules {
		if e.cfg.Serve.Schedules[i].Name == "eager" {
			e.cfg.Serve.Schedules[i].Prompt = "edited {{.Name}}"
		}
	}
	crashState(t, e.state, at("10:00"), at("10:00"))
	second := e.start()
	e.waitLog("not delivered", "schedule=eager", "AGENT_REQUEST_ID_REUSED")
	// Long enough for a few of the retries' backoffs.
	time.Sleep(time.Second)
	if err := second.Stop(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if n := e.logs.count("not delivered", "schedule=eager"); n != 1 {
		t.Fatalf("the run was tried %d times; want once:\n%s", n, e.logs.all())
	}
	if got := e.prompts("sched-eager"); len(got) != 1 || got[0] != "eager 10:00" {
		t.Fatalf("the session's prompts: %q", got)
	}
}
