package schedule_test

import (
	stdctx "context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/serve/schedule"
	"github.com/dsh-go/dsh/services/session"
)

const everySecond = `serve:
  schedules:
    - name: tick
      cron: "@every 1s"
      session: sched-c
      # A run claimed while this host's previous turn still runs (a
      # loaded machine) waits for it rather than leave a gap.
      overlap: queue
      prompt: "tick {{.Time.Format \"15:04:05\"}}"
`

// requestIDs returns the request ids of the prompts session id received
// on e's host.
func (e *env) requestIDs(id string) []string {
	var out []string
	for _, ev := range e.events(id) {
		if ev.Type == session.UserMessage {
			out = append(out, ev.RequestID)
		}
	}
	return out
}

// Three hosts run the same @every 1s schedule on the real clock, claiming
// through one JetStream server: every scheduled time runs on exactly one
// of them, under the request id of that time, with no time left out; once
// one host dies, the two others go on the same way.
func TestThreeHostsRunEachScheduledTimeOnce(t *testing.T) {
	srv := natstest.Single(t)
	stream := "SCHED"
	type member struct {
		e     *env
		s     *schedule.Scheduler
		fires *cluster.Fires
	}
	var hosts []*member
	for _, id := range []string{"a", "b", "c"} {
		e := newEnv(t, "", everySecond)
		f, err := cluster.OpenFires(t.Context(), cluster.Options{URL: srv.ClientURL(), Stream: stream, HostID: id})
		if err != nil {
			t.Fatal(err)
		}
		s, err := schedule.New(schedule.Options{Sessions: e.h.Sessions(), Config: e.cfg, StateDir: e.state,
			Log: slog.New(e.logs), Claim: f.Claim})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, &member{e, s, f})
	}
	var stopOnce sync.Map
	stop := func(m *member) {
		if _, done := stopOnce.LoadOrStore(m, true); done {
			return
		}
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), wait)
		defer cancel()
		if err := m.s.Stop(ctx); err != nil {
			t.Error(err)
		}
		m.fires.Close()
	}
	t.Cleanup(func() {
		for _, m := range hosts {
			stop(m)
		}
	})
	for _, m := range hosts {
		m.s.Start()
	}
	// runs maps each request id to the hosts that ran it.
	runs := func() map[string][]string {
		out := map[string][]string{}
		for i, m := range hosts {
			for _, id := range m.e.requestIDs("sched-c") {
				out[id] = append(out[id], string(rune('a'+i)))
			}
		}
		return out
	}
	waitUntil(t, "four runs", func() bool { return len(runs()) >= 4 })
	stop(hosts[0]) // host a dies; whatever it claimed meanwhile it ran
	died := time.Now()
	waitUntil(t, "four more runs after host a stopped", func() bool {
		n := 0
		for id := range runs() {
			if at := runTime(t, id); at.After(died) {
				n++
			}
		}
		return n >= 4
	})
	for _, m := range hosts[1:] {
		stop(m) // so the runs no longer change
	}

	got := runs()
	var times []time.Time
	for id, by := range got {
		if len(by) != 1 {
			t.Errorf("run %s ran on hosts %v; want exactly one", id, by)
		}
		times = append(times, runTime(t, id))
	}
	slices.SortFunc(times, time.Time.Compare)
	lost := 0
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap != time.Second {
			// Host a may have claimed a run as it stopped and not
			// started it: a claimed run is delivered at most once. That
			// one, at its death, may be missing; no other.
			missing := times[i-1].Add(time.Second)
			if gap == 2*time.Second && lost == 0 && missing.After(died.Add(-2*time.Second)) && missing.Before(died.Add(time.Second)) {
				lost++
				continue
			}
			t.Errorf("runs at %s and %s: a scheduled time ran nowhere; ran: %v", times[i-1].Format(time.TimeOnly), times[i].Format(time.TimeOnly), got)
		}
	}
	after := 0
	for id, by := range got {
		if runTime(t, id).After(died) {
			after++
			if by[0] == "a" {
				t.Errorf("run %s ran on host a after it stopped", id)
			}
		}
	}
	if after < 4 {
		t.Fatalf("%d runs after host a stopped; want at least 4", after)
	}
}

// runTime parses the scheduled time out of a run's request id.
func runTime(t *testing.T, id string) time.Time {
	t.Helper()
	i := strings.Index(id, ":20")
	at, err := time.Parse(time.RFC3339, id[i+1:])
	if !strings.HasPrefix(id, "schedule:tick:") || i < 0 || err != nil {
		t.Fatalf("request id %q is not a run of schedule tick: %v", id, err)
	}
	return at
}
