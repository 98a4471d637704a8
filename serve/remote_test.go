package serve_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/services/approval"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
	"github.com/dsh-go/dsh/services/sessions/live"
	"github.com/nats-io/nats-server/v2/server"
)

// startNATS runs a JetStream server until the test ends.
func startNATS(t *testing.T) *server.Server { return natstest.Single(t) }

// sessionNATS is a host's session.nats entry on the shared stream.
func sessionNATS(url, hostID string) string {
	return fmt.Sprintf("  - use: session.nats\n    config: {url: %q, stream: REMOTE, subject_prefix: dsh.remote, lease_ttl: 3s, host_id: %s}\n", url, hostID)
}

// elsewhere is a session service as a cluster's looks from a host that
// does not run the session: what is open here is the controller's; the
// Info and Attach of a session open on another host come from the shared
// log through a cluster.Follower, durable events only. The server sees
// only the interface, so this is what it does on such a host.
type elsewhere struct {
	sessions.Service
	f *cluster.Follower
}

// remote says whether id is not open here, and its last stored seq.
func (e elsewhere) remote(ctx stdctx.Context, id string) (bool, int64, error) {
	if _, err := e.Service.Info(ctx, id); !errs.HasCode(err, sessions.NotFound) {
		return false, 0, err
	}
	last, err := e.f.LastSeq(ctx, id)
	if errs.HasCode(err, session.NotFound) || errs.HasCode(err, errs.InvalidArgument) {
		// An id that cannot name a session names none.
		err = errs.New(sessions.NotFound, fmt.Sprintf("no session %q is open on any host", id))
	}
	return true, last, err
}

func (e elsewhere) Info(ctx stdctx.Context, id string) (sessions.Info, error) {
	remote, last, err := e.remote(ctx, id)
	if !remote || err != nil {
		return e.Service.Info(ctx, id)
	}
	return sessions.Info{ID: id, LastSeq: last}, nil
}

func (e elsewhere) Attach(ctx stdctx.Context, id string, o sessions.AttachOptions) (sessions.Stream, error) {
	remote, _, err := e.remote(ctx, id)
	if !remote {
		return e.Service.Attach(ctx, id, o)
	}
	if err != nil {
		return nil, err
	}
	return follow(e.f, id, o.AfterSeq), nil
}

// followed is a Stream of the durable events the follower reads.
type followed struct {
	updates chan live.Update
	cancel  stdctx.CancelFunc
	done    chan struct{}
	last    atomic.Int64
}

func follow(f *cluster.Follower, id string, after int64) *followed {
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	st := &followed{updates: make(chan live.Update), cancel: cancel, done: make(chan struct{})}
	st.last.Store(after)
	go func() {
		defer close(st.done)
		_ = f.Follow(ctx, id, after, func(e session.Event) error {
			select {
			case st.updates <- live.Update{Kind: live.KindEvent, Seq: e.Seq, Event: &e}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return st
}

func (st *followed) Next(ctx stdctx.Context) (live.Update, error) {
	select {
	case u := <-st.updates:
		st.last.Store(u.Seq)
		return u, nil
	case <-st.done:
		return live.Update{}, errs.New(live.Detached, "the follower stopped")
	case <-ctx.Done():
		return live.Update{}, ctx.Err()
	}
}

func (st *followed) Answer(int64, approval.Answer) error {
	return errs.New(live.QuestionClosed, "a followed stream answers nothing")
}
func (st *followed) LastSeq() int64  { return st.last.Load() }
func (st *followed) Reattaches() int { return 0 }
func (st *followed) Close() error    { st.cancel(); <-st.done; return nil }

// Host B, which does not have the session open, streams host A's session
// from JetStream live through its session service, and a client that
// drops resumes there with Last-Event-ID: every durable event once, none
// missing; the notice part of its id comes back as it was sent.
func TestStreamOfASessionOpenOnAnotherHost(t *testing.T) {
	t.Cleanup(serve.SetTimings(time.Minute, 20*time.Millisecond))
	ns := startNATS(t)
	a := newEnv(t, envOpts{persist: sessionNATS(ns.ClientURL(), "a"), delay: 200_000, extra: "  - use: tools.clock\n", replies: []scripted.Reply{
		{Text: words(20), ToolCalls: []scripted.Call{{Name: "clock"}}},
		{Text: words(20), ToolCalls: []scripted.Call{{Name: "clock"}}},
		{Text: words(20)},
		{Text: words(20)},
	}})
	f, err := cluster.NewFollower(cluster.Options{URL: ns.ClientURL(), Stream: "REMOTE", SubjectPrefix: "dsh.remote"})
	if err != nil {
		t.Fatal(err)
	}
	b := newEnv(t, envOpts{persist: sessionNATS(ns.ClientURL(), "b"), service: func(c *sessions.Controller) sessions.Service {
		return elsewhere{Service: c, f: f}
	}})
	t.Cleanup(func() { f.Close() }) // before b's shutdown, which it must not block

	id := a.open(nil)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	// Open on A, nothing stored yet: B streams it from its first event.
	s1 := b.stream(ctx, id, nil)
	m, _ := s1.next(t)
	var ready struct {
		Session string `json:"session"`
		LastSeq int64  `json:"last_seq"`
	}
	if json.Unmarshal(m.data, &ready); m.event != "ready" || ready.Session != id || ready.LastSeq != 0 {
		t.Fatalf("first message %q %s", m.event, m.data)
	}
	// While nothing comes, the stream is pinged.
	deadline := time.Now().Add(patience)
	for s1.pings.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pings on a remote stream", s1.pings.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	a.send(id, "go", "go")
	var got streamed
	b.consume(t, s1, &got, func(update) bool { return len(got.seqs) >= 3 })
	s1.close()

	s2 := b.stream(ctx, id, nil, "Last-Event-ID", got.lastID)
	defer s2.close()
	b.consume(t, s2, &got, isTurnEnd)
	evs := a.events(id)
	contiguous(t, got.seqs, len(evs))
	if got.kinds["chunk"] != 0 || got.kinds["snapshot"] != 0 || got.kinds["ready"] != 1 {
		t.Fatalf("a remote stream carried %v", got.kinds)
	}
	// Still attached, it follows the next turn live.
	a.send(id, "again", "again")
	b.consume(t, s2, &got, isTurnEnd)
	evs = a.events(id)
	contiguous(t, got.seqs, len(evs))

	// GET .../events on B reads the same log from its store.
	if onB := b.events(id); len(onB) != len(evs) || onB[len(onB)-1].Type != evs[len(evs)-1].Type {
		t.Fatalf("B's events: %d, A's: %d", len(onB), len(evs))
	}
	// An id's notice part is kept: the client's place in A's notices.
	s3 := b.stream(ctx, id, nil, "Last-Event-ID", fmt.Sprintf("%d-7", len(evs)-1))
	var last streamed
	b.consume(t, s3, &last, isTurnEnd)
	s3.close()
	if len(last.seqs) != 1 || last.lastID != fmt.Sprintf("%d-7", len(evs)) {
		t.Fatalf("resumed from %d-7: seqs %v, last id %q", len(evs)-1, last.seqs, last.lastID)
	}

	for _, unknown := range []string{"nobody", "-bad-id"} {
		r := b.call("GET", "/v1/sessions/"+unknown+"/stream", nil)
		if r.status != http.StatusNotFound || r.err(t).Code != "SESSION_NOT_FOUND" {
			t.Fatalf("streaming the unknown session %q: %d %s", unknown, r.status, r.body)
		}
	}

	// Shutdown ends a remote stream, as it does a local one.
	sctx, scancel := stdctx.WithTimeout(stdctx.Background(), patience)
	defer scancel()
	if err := b.shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s2.done:
	case <-time.After(patience):
		t.Fatal("the remote stream outlived the shutdown")
	}
}
