package schedule_test

import (
	stdctx "context"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/internal/testtools"
	_ "github.com/dsh-go/dsh/plugins/all"
	"github.com/dsh-go/dsh/serve/schedule"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// Some tests run a NATS server: natstest's check gives its loops the time
// they take to end.
func TestMain(m *testing.M) { natstest.VerifyTestMain(m) }

// wait bounds every wait of the tests.
const wait = 10 * time.Second

// clock is a fake clock: time moves only when the test advances it.
type clock struct {
	mu      sync.Mutex
	now     time.Time
	waiters map[*waiter]struct{}
}

type waiter struct {
	at time.Time
	c  chan time.Time
}

func newClock(now time.Time) *clock { return &clock{now: now, waiters: map[*waiter]struct{}{}} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Timer(at time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := &waiter{at: at, c: make(chan time.Time, 1)}
	if !at.After(c.now) {
		w.c <- c.now
		return w.c, func() {}
	}
	c.waiters[w] = struct{}{}
	return w.c, func() {
		c.mu.Lock()
		delete(c.waiters, w)
		c.mu.Unlock()
	}
}

// set moves the clock to t and wakes the waiters it reached.
func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
	for w := range c.waiters {
		if !w.at.After(t) {
			w.c <- t
			delete(c.waiters, w)
		}
	}
}

// logs records the scheduler's log messages.
type logs struct {
	mu   sync.Mutex
	msgs []string
}

func (l *logs) Enabled(stdctx.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler      { return l }
func (l *logs) WithGroup(string) slog.Handler           { return l }
func (l *logs) Handle(_ stdctx.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	l.mu.Lock()
	l.msgs = append(l.msgs, b.String())
	l.mu.Unlock()
	return nil
}

// count returns how many messages contain all of parts.
func (l *logs) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
next:
	for _, m := range l.msgs {
		for _, p := range parts {
			if !strings.Contains(m, p) {
				continue next
			}
		}
		n++
	}
	return n
}

func (l *logs) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.msgs, "\n")
}

// env is a host and what its schedulers share.
type env struct {
	t     *testing.T
	h     *host.Host
	cfg   *config.Config
	state string
	clock *clock
	logs  *logs
}

// at is a time on the test day, in UTC.
func at(hhmm string) time.Time {
	t, err := time.Parse("2006-01-02 15:04", "2026-03-02 "+hhmm)
	if err != nil {
		panic(err)
	}
	return t
}

// newEnv starts a host with the scripted model (echo unless replies are
// given), a session store, the block tool and the schedules of serve.
func newEnv(t *testing.T, replies, serve string) *env {
	t.Helper()
	return newEnvWith(t, replies, "", serve)
}

// newEnvWith is newEnv with more plugin entries (YAML list items).
func newEnvWith(t *testing.T, replies, extra, serve string) *env {
	t.Helper()
	testtools.ResetBlock()
	if replies == "" {
		replies = "[]"
	}
	yaml := "plugins:\n  - use: llm.scripted\n    config: {replies: " + replies + "}\n" +
		"  - use: session.jsonl\n    config: {dir: " + t.TempDir() + "}\n  - use: test.block\n  - use: test.risky\n" + extra +
		"agents:\n  - id: main\n    provider: scripted\n" + serve
	cfg, err := config.Parse("test.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	return &env{t: t, h: h, cfg: cfg, state: filepath.Join(t.TempDir(), "serve"), clock: newClock(at("09:58")), logs: &logs{}}
}

// start starts a scheduler on the env's clock and state; it is stopped
// at cleanup unless the test stops it.
func (e *env) start() *schedule.Scheduler {
	e.t.Helper()
	s, err := schedule.New(schedule.Options{Sessions: e.h.Sessions(), Config: e.cfg, StateDir: e.state,
		Log: slog.New(e.logs), Now: e.clock.Now, Timer: e.clock.Timer})
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
	return s
}

// events returns the log of session id, read through the session service
// while it is open on e's host; nil when it is not.
func (e *env) events(id string) []session.Event {
	e.t.Helper()
	if _, ok := e.h.Sessions().Get(id); !ok {
		return nil
	}
	evs, err := e.h.Sessions().History(stdctx.Background(), id, 0)
	if err != nil {
		e.t.Fatalf("the history of session %q: %v", id, err)
	}
	return evs
}

// prompts returns the prompts the open session id received.
func (e *env) prompts(id string) []string {
	var out []string
	for _, ev := range e.events(id) {
		if ev.Type == session.UserMessage {
			out = append(out, ev.Message.Content)
		}
	}
	return out
}

// waitUntil polls cond until it holds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitPrompts waits until session id received want, in order.
func (e *env) waitPrompts(id string, want ...string) {
	e.t.Helper()
	waitUntil(e.t, "the session received "+strings.Join(want, ", "), func() bool {
		return strings.Join(e.prompts(id), "|") == strings.Join(want, "|")
	})
}

// waitLog waits until a log message contains all of parts.
func (e *env) waitLog(parts ...string) {
	e.t.Helper()
	deadline := time.Now().Add(wait)
	for e.logs.count(parts...) == 0 {
		if time.Now().After(deadline) {
			e.t.Fatalf("no log message with %q; logged:\n%s", parts, e.logs.all())
		}
		time.Sleep(2 * time.Millisecond)
	}
}
