package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
)

// TestAScheduledRunDueWhileDownRunsOnceAcrossKills holds docs/schedules.md
// across SIGKILLs of dsh serve: with catch_up, the latest run that came due
// while dsh was down runs once at start; dsh is killed in that run's turn,
// and the next start runs it no second time (it was recorded before it was
// delivered: at most once per scheduled time). Without catch_up, a run
// due while down is reported and not run.
func TestAScheduledRunDueWhileDownRunsOnceAcrossKills(t *testing.T) {
	for _, catchUp := range []bool{true, false} {
		t.Run(fmt.Sprint("catch_up=", catchUp), func(t *testing.T) {
			store, state := t.TempDir(), t.TempDir()
			// Two runs came due while "down": the last one handled was two
			// hours ago.
			due := time.Now().UTC().Truncate(time.Hour)
			doc := fmt.Sprintf(`{"version":1,"schedules":{"hourly":{"last":%q}}}`, due.Add(-2*time.Hour).Format(time.RFC3339))
			if err := os.WriteFile(filepath.Join(state, "schedules.json"), []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg := crashServeConfig(t, store, state, fmt.Sprintf(`  schedules:
    - name: hourly
      cron: "CRON_TZ=UTC 0 * * * *"
      session: ticks
      catch_up: %v
      prompt: "tick {{.Time.Format \"2006-01-02T15:04\"}}"
`, catchUp))
			tick := "tick " + due.Format("2006-01-02T15:04")
			logPath := filepath.Join(store, "ticks.jsonl")
			p := startServe(t, cfg)
			if !catchUp {
				crashWaitStderr(t, p, "schedule runs were due while dsh was down; not replayed")
				time.Sleep(500 * time.Millisecond)
				if n := crashPrompts(crashLog(t, logPath)); len(n) != 0 {
					t.Fatalf("without catch_up a missed run ran: %v", n)
				}
				p.kill()
				return
			}
			crashWait(t, logPath, "the catch-up run's turn", func(l []crashLine) bool { return crashPrompts(l)[tick] == 1 }, p)
			p.kill()

			p = startServe(t, cfg)
			// The scheduler has looked at its state by the time the server
			// listens; give a wrongly repeated run the time to reach the log.
			time.Sleep(1500 * time.Millisecond)
			if n := crashPrompts(crashLog(t, logPath)); n[tick] != 1 || len(n) != 1 {
				t.Fatalf("after a kill in the catch-up run's turn and a restart: %v; want %q once", n, tick)
			}
			if strings.Contains(p.log.String(), "catching up") {
				t.Fatalf("the restart caught up again:\n%s", p.log.String())
			}
			p.kill()
		})
	}
}

// crashWaitStderr waits until the process's stderr holds want.
func crashWaitStderr(t *testing.T, p *serveProcess, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(p.log.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr never said %q:\n%s", want, p.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAQueuedScheduledRunCutByAKillRunsOnceWithCatchUp: with overlap:
// queue, a run that came due while the previous run's turn still ran
// waits in the scheduler, recorded as handled but in no log, when dsh
// serve is SIGKILLed. With catch_up the next start runs it, once (or, if a
// later run came due while dsh was down, that later one in its place); the
// run whose turn the kill interrupted is not run again.
func TestAQueuedScheduledRunCutByAKillRunsOnceWithCatchUp(t *testing.T) {
	t.Run("session.jsonl", func(t *testing.T) {
		store := t.TempDir()
		logPath := filepath.Join(store, "ticks.jsonl")
		queuedRunKill(t, "  - use: session.jsonl\n    config: {dir: "+store+"}\n",
			func(*serveProcess) []crashLine { return crashLog(t, logPath) })
	})
	t.Run("session.nats", func(t *testing.T) {
		srv := natstest.Single(t)
		// The killed process's lease on the session outlives it by up to
		// lease_ttl: the restart's delivery waits it out.
		queuedRunKill(t, fmt.Sprintf("  - use: session.nats\n    config: {url: %q, stream: CRASH, lease_ttl: 2s}\n", srv.ClientURL()),
			func(p *serveProcess) []crashLine { return apiLog(t, p, "ticks") })
	})
}

func queuedRunKill(t *testing.T, storeYAML string, read func(*serveProcess) []crashLine) {
	state := t.TempDir()
	cfg := crashServeConfigWith(t, storeYAML, state, `  schedules:
    - name: often
      cron: "@every 2s"
      session: ticks
      overlap: queue
      catch_up: true
      prompt: "tick {{.Time.Format \"15:04:05\"}}"
`)
	p := startServe(t, cfg)
	lines := crashWaitFor(t, "the first run's turn", func() []crashLine { return read(p) }, func(l []crashLine) bool { return len(crashPrompts(l)) == 1 }, p)
	crashWaitStderr(t, p, "schedule run queued")
	var queued string
	for _, l := range strings.Split(p.log.String(), "\n") {
		if strings.Contains(l, "schedule run queued") {
			queued = l
		}
	}
	if n := crashPrompts(read(p)); len(n) != 1 {
		t.Fatalf("the queued run reached the log before the kill: %v", n)
	}
	p.kill()
	var first string
	for k := range crashPrompts(lines) {
		first = k
	}

	// The queued run's time, as the prompt renders it.
	_, at, _ := strings.Cut(queued, "time=")
	when, err := time.Parse(time.RFC3339Nano, strings.Fields(at)[0])
	if err != nil {
		t.Fatalf("no time in %q: %v", queued, err)
	}
	want := "tick " + when.Format("15:04:05")
	p = startServe(t, cfg)
	// The restart delivers the cut run again, unless a later run came due
	// while dsh was down (a slow restart on a loaded machine): then, as
	// documented, the latest missed run runs once in its place.
	deadline := time.Now().Add(30 * time.Second)
	for {
		out := p.log.String()
		if strings.Contains(out, "delivering it again") {
			break
		}
		if _, after, ok := strings.Cut(out, "catching up once"); ok {
			_, at, _ := strings.Cut(after, "time=")
			late, err := time.Parse(time.RFC3339Nano, strings.Fields(at)[0])
			if err != nil {
				t.Fatalf("no time in the catch-up line: %v\n%s", err, out)
			}
			if !late.After(when) {
				t.Fatalf("the catch-up ran %s, not later than the cut run %s:\n%s", late, when, out)
			}
			want = "tick " + late.Format("15:04:05")
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restart neither delivered the cut run again nor caught up:\n%s", out)
		}
		time.Sleep(20 * time.Millisecond)
	}
	got := crashWaitFor(t, "the queued run after the restart", func() []crashLine { return read(p) }, func(l []crashLine) bool { return crashPrompts(l)[want] >= 1 }, p)
	if n := crashPrompts(got); n[first] != 1 || n[want] != 1 {
		t.Fatalf("after the restart: %v; want %q and %q once each", n, first, want)
	}
	p.kill()
}

// TestScheduledRunsKilledRightAfterDeliveryRunOnce: a schedule every
// three seconds without session: (each run its own session), catch_up on;
// dsh serve is SIGKILLed 0 to 15 ms after a run is delivered, four times,
// and restarted (within the interval: a run missed later would replace
// the cut one). No run is in a log twice, and the run each kill cut is
// delivered again at the next start, so it ends in its session's log.
func TestScheduledRunsKilledRightAfterDeliveryRunOnce(t *testing.T) {
	store, state := t.TempDir(), t.TempDir()
	path := filepath.Join(t.TempDir(), "config.yaml")
	os.WriteFile(path, []byte("plugins:\n  - use: llm.scripted\n  - use: session.jsonl\n    config: {dir: "+store+"}\n"+
		"agents:\n  - id: main\n    provider: scripted\nlog:\n  level: info\n"+
		"serve:\n  no_auth: true\n  state_dir: "+state+"\n  schedules:\n"+
		"    - {name: tick, cron: \"@every 3s\", catch_up: true, prompt: \"tick {{.Time.Format \\\"15:04:05\\\"}}\"}\n"), 0o644)
	var cut []string
	for i := range 4 {
		p := startServe(t, path)
		crashWaitStderr(t, p, "schedule run delivered")
		time.Sleep(time.Duration(i*5) * time.Millisecond)
		p.kill()
		for _, l := range strings.Split(p.log.String(), "\n") {
			if _, rest, ok := strings.Cut(l, "request_id=schedule:tick:"); ok {
				cut = append(cut, strings.Fields(rest)[0])
			}
		}
	}
	p := startServe(t, path)
	// Every run delivered before a kill has its prompt in its own session.
	for _, id := range cut {
		when, err := time.Parse(time.RFC3339, id)
		if err != nil {
			t.Fatal(err)
		}
		logPath := filepath.Join(store, "schedule-tick-"+when.UTC().Format("20060102T150405Z")+".jsonl")
		want := "tick " + when.Local().Format("15:04:05")
		crashWait(t, logPath, "the run of "+id, func(l []crashLine) bool { return crashPrompts(l)[want] >= 1 }, p)
	}
	p.kill()
	// Across every session of the store: a run delivered again after a
	// kill finds the session that took it, rather than running in another.
	files, _ := filepath.Glob(filepath.Join(store, "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no run reached a log")
	}
	all := map[string][]string{}
	for _, f := range files {
		for prompt, n := range crashPrompts(crashLog(t, f)) {
			for range n {
				all[prompt] = append(all[prompt], filepath.Base(f))
			}
		}
	}
	for prompt, in := range all {
		if len(in) != 1 {
			t.Fatalf("the run %q ran %d times: %v", prompt, len(in), in)
		}
	}
}
