package serve_test

import (
	stdctx "context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Rotation, for a soak: a prompted session is closed after cfg.rotate
// turns and a fresh one opened in its place, with new subscribers. The
// sessions' histories then stop growing — each holds at most rotate turns
// — so memory that still grows over a long run is a leak, not history;
// and the closes and opens themselves are exercised thousands of times.

// TestLoadRotatedSessions is the soak's shape at CI size: prompted
// sessions are closed after 3 turns and replaced, their subscribers with
// them. Every subscriber, retired or not, held every seq once; the
// sessions closed are closed (stored, not open), and the server holds
// open exactly the sessions in use, not the ones rotated out.
func TestLoadRotatedSessions(t *testing.T) {
	cfg := loadConfig{subscribers: 40, sessions: 40, active: 8, rate: 20, duration: 4 * time.Second, dropEvery: 4, rotate: 3, settle: 30 * time.Second}
	env := startLoadEnvWith(t, loadEnvOptions{delay: loadChunkDelay})
	res := env.run(t, cfg)
	res.log(t, cfg)
	res.check(t, cfg)
	// 80 prompts over 8 slots: 10 turns each, rotated after the 3rd, 6th
	// and 9th.
	if res.retired.sessions != 3*cfg.active {
		t.Errorf("%d sessions rotated, want %d", res.retired.sessions, 3*cfg.active)
	}
	var list struct {
		Sessions []struct {
			ID    string `json:"id"`
			Open  bool   `json:"open"`
			Turns int    `json:"turns"`
		} `json:"sessions"`
	}
	if _, err := env.call(t.Context(), http.MethodGet, "/v1/sessions", nil, &list); err != nil {
		t.Fatal(err)
	}
	open, closed := 0, 0
	for _, s := range list.Sessions {
		switch {
		case s.Open:
			open++
		case s.Turns == cfg.rotate:
			closed++
		default:
			t.Errorf("session %s: closed with %d turns, want %d", s.ID, s.Turns, cfg.rotate)
		}
	}
	if open != cfg.sessions || closed != 3*cfg.active {
		t.Errorf("%d sessions open, %d closed after %d turns; want %d and %d", open, closed, cfg.rotate, cfg.sessions, 3*cfg.active)
	}
}

// loadSlot is one of the prompted sessions' places. Its posts are
// numbered as dispatched; a rotation waits for every post before it to
// end, so the session it closes is settled, and the posts after it wait
// for its gate, so none goes to the closed session.
type loadSlot struct {
	// gate is the current session's; turns the posts dispatched to it
	// (both the dispatching loop's alone).
	gate  *loadGate
	turns int
	// dispatched counts the posts dispatched to the slot, finished those
	// that ended (accepted or not).
	dispatched int
	finished   atomic.Int64
	// subs are the indexes in loadResult.subs of the slot's subscribers;
	// running their stops. Only a rotation changes them, and rotations
	// of a slot run one after another.
	subs    []int
	running []loadRunning
}

// loadGate is one session of a slot: done is closed once id is open and
// subscribed; prompts are the posts dispatched to it.
type loadGate struct {
	done    chan struct{}
	id      string
	prompts []int
}

// loadRunning stops one subscriber and waits for its goroutine.
type loadRunning struct {
	cancel stdctx.CancelFunc
	done   chan struct{}
}

func (r loadRunning) stop() {
	r.cancel()
	<-r.done
}

// loadRetired sums up the subscribers of rotated-out sessions, checked as
// they go, so a soak's client keeps no state per finished turn beyond the
// latencies (preallocated).
type loadRetired struct {
	mu                                                       sync.Mutex
	sessions                                                 int
	events, connects, drops, ends, failures                  int
	assembled, snapshots, resnapshots, gaps, doubles, faulty int
	problems                                                 []string
	userLat, answerLat                                       []time.Duration
	errs                                                     []string
}

func (r *loadRetired) fail(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.errs) < 10 {
		r.errs = append(r.errs, fmt.Sprintf(format, args...))
	}
}

// retire folds s, which has stopped, into the sums.
func (r *loadRetired) retire(s *loadSubscriber) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	bad := s.gaps+s.doubles > 0 || len(s.problems) > 0
	for id, n := range s.prompts {
		if n != 1 {
			bad = true
			s.problemLocked("prompt %s seen %d times", id, n)
		}
	}
	if bad {
		r.faulty++
		if len(r.problems) < 5 {
			r.problems = append(r.problems, fmt.Sprintf("subscriber of %s (drop every %d; %d connects): %d gaps, %d doubled; %q",
				s.session, s.dropEvery, s.connects, s.gaps, s.doubles, s.problems))
		}
	}
	r.events += s.events
	r.connects += s.connects
	r.drops += s.drops
	r.ends += s.ends
	r.failures += s.failures
	r.assembled += s.assembled
	r.snapshots += s.snapshots
	r.resnapshots += s.resnapshots
	r.gaps += s.gaps
	r.doubles += s.doubles
	r.userLat = append(r.userLat, s.userLat...)
	r.answerLat = append(r.answerLat, s.answerLat...)
}

// openSession makes a session; unlike newSession it may run on any
// goroutine.
func (e *loadEnv) openSession(ctx stdctx.Context) (string, error) {
	var s struct {
		ID string `json:"id"`
	}
	code, err := e.call(ctx, http.MethodPost, "/v1/sessions", map[string]any{"agent": "main"}, &s)
	if err == nil && (code != http.StatusCreated || s.ID == "") {
		err = fmt.Errorf("POST /v1/sessions: %d, id %q; want 201 with an id", code, s.ID)
	}
	return s.ID, err
}

// rotate replaces the session of old, whose posts are the first wait of
// slot sl, with a new one, subscribed as the old one was, and opens next.
// start runs a subscriber until its stop. On a failure the slot keeps its
// session and the error is recorded.
func (e *loadEnv) rotate(ctx stdctx.Context, res *loadResult, sl *loadSlot, old, next *loadGate, wait int, settle time.Duration, start func(*loadSubscriber) loadRunning) {
	defer close(next.done)
	// old.id is the previous rotation's to write until its post ended.
	for sl.finished.Load() < int64(wait) {
		if ctx.Err() != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	next.id = old.id
	var want []string
	for _, i := range old.prompts {
		if res.accepted[i] {
			want = append(want, "load-"+strconv.Itoa(i))
		}
	}
	for deadline := time.Now().Add(settle); ; time.Sleep(5 * time.Millisecond) {
		done := true
		for _, k := range sl.subs {
			done = done && res.subs[k].settled(want)
		}
		if done {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			res.retired.fail("session %s: its subscribers lack a prompt or its answer %v after its last post", old.id, settle)
			return
		}
	}
	id, err := e.openSession(ctx)
	if err != nil {
		res.retired.fail("rotation: %v", err)
		return
	}
	// The subscribers go first: a stream of a closed session ends, and a
	// subscriber would reconnect to it.
	for _, r := range sl.running {
		r.stop()
	}
	if _, err := e.call(ctx, http.MethodPost, "/v1/sessions/"+old.id+"/close", nil, nil); err != nil {
		res.retired.fail("rotation: closing %s: %v", old.id, err)
	}
	for j, k := range sl.subs {
		prev := res.subs[k]
		res.retired.retire(prev)
		s := newLoadSubscriber(e.base, e.token, id, prev.client, prev.dropEvery, prev.sentAt)
		s.afterQuery = prev.afterQuery
		sl.running[j] = start(s)
		res.subs[k] = s
		select {
		case <-s.ready:
		case <-time.After(30 * time.Second):
			res.retired.fail("subscriber of %s: no ready within 30s", id)
		case <-ctx.Done():
			return
		}
	}
	res.retired.mu.Lock()
	res.retired.sessions++
	res.retired.mu.Unlock()
	next.id = id
}

// loadSlopes states how RSS, the live heap, heap in use and goroutines
// grew after the warm-up: the least-squares slope over those samples, a
// minute and a turn. A leak is a slope that stays when the working set is
// bounded (-load.rotate).
func loadSlopes(samples []loadSample, cfg loadConfig) string {
	var after []loadSample
	for _, s := range samples {
		if s.at >= cfg.warmup {
			after = append(after, s)
		}
	}
	if len(after) < 3 {
		return fmt.Sprintf("slopes: %d samples after the %v warm-up, too few\n", len(after), cfg.warmup)
	}
	slope := func(y func(loadSample) float64) float64 {
		var sx, sy, sxx, sxy float64
		for _, s := range after {
			x := s.at.Minutes()
			sx += x
			sy += y(s)
			sxx += x * x
			sxy += x * y(s)
		}
		n := float64(len(after))
		return (n*sxy - sx*sy) / (n*sxx - sx*sx)
	}
	turnsPerMin := cfg.rate * 60
	var b strings.Builder
	fmt.Fprintf(&b, "slopes after the %v warm-up (%d samples, %v to %v), a minute (a turn):", cfg.warmup, len(after), after[0].at, after[len(after)-1].at)
	for _, m := range []struct {
		name string
		y    func(loadSample) float64
	}{
		{"RSS", func(s loadSample) float64 { return float64(s.rss) }},
		{"live heap", func(s loadSample) float64 { return float64(s.heap) }},
		{"heap in use", func(s loadSample) float64 { return float64(s.inuse) }},
	} {
		k := slope(m.y)
		fmt.Fprintf(&b, " %s %+.1f KB (%+.0f B);", m.name, k/1e3, k/turnsPerMin)
	}
	fmt.Fprintf(&b, " goroutines %+.2f\n", slope(func(s loadSample) float64 { return float64(s.goroutines) }))
	return b.String()
}
