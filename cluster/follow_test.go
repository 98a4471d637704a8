package cluster_test

import (
	stdctx "context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/hosttest"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/natstest"
	_ "github.com/dsh-go/dsh/plugins/llm/scripted"
	_ "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/agentcontroller"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// startNATS runs a JetStream server until the test ends.
func startNATS(t *testing.T) *server.Server { return natstest.Single(t) }

const (
	testStream = "FOLLOW"
	testPrefix = "dsh.follow"
)

// startWriter is host A: its agents "main" and "idle" keep the sessions
// s1 and s2 in the stream through session.nats.
func startWriter(t *testing.T, url string) *host.Host {
	t.Helper()
	yaml := fmt.Sprintf(`plugins:
  - use: llm.scripted
  - use: session.nats
    config: {url: %q, stream: %q, subject_prefix: %q, lease_ttl: 3s, host_id: a}
agents:
  - id: main
    provider: scripted
    session: s1
  - id: idle
    provider: scripted
    session: s2
`, url, testStream, testPrefix)
	cfg, err := config.Parse("a.yaml", []byte(yaml), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	h, err := hosttest.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(stdctx.Background()) })
	return h
}

// say runs one turn of agent id and returns the seq of its log's last
// event.
func say(t *testing.T, h *host.Host, id, text string) int64 {
	t.Helper()
	a, _ := h.Agent(id)
	if _, err := h.Controller().Deliver(stdctx.Background(), a, agentcontroller.Request{Mode: agentcontroller.Followup, Content: text}); err != nil {
		t.Fatal(err)
	}
	if err := a.WhenIdle(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	return int64(a.Session().Len())
}

// stored waits until the stream holds session id up to seq.
func stored(t *testing.T, f *cluster.Follower, id string, seq int64) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		last, err := f.LastSeq(stdctx.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if last == seq {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: the stream holds up to seq %d, the writer has %d", id, last, seq)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// following is a Follow running in the background.
type following struct {
	events chan session.Event
	done   chan error
	cancel stdctx.CancelFunc
}

func follow(f *cluster.Follower, id string, after int64) *following {
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	fl := &following{events: make(chan session.Event, 1024), done: make(chan error, 1), cancel: cancel}
	go func() {
		fl.done <- f.Follow(ctx, id, after, func(e session.Event) error {
			fl.events <- e
			return nil
		})
	}()
	return fl
}

// until reads events until seq last, checking each is the next one after
// from, and that they are the writer's.
func (fl *following) until(t *testing.T, h *host.Host, agent string, from, last int64) {
	t.Helper()
	a, _ := h.Agent(agent)
	want := a.Session().Events(1)
	for next := from + 1; next <= last; next++ {
		select {
		case e := <-fl.events:
			if e.Seq != next {
				t.Fatalf("got event %d where %d was due (a gap or a duplicate)", e.Seq, next)
			}
			if w := want[e.Seq-1]; e.Type != w.Type || e.Turn != w.Turn {
				t.Fatalf("event %d is %s of turn %d; the writer's is %s of turn %d", e.Seq, e.Type, e.Turn, w.Type, w.Turn)
			}
		case err := <-fl.done:
			t.Fatalf("the follow ended at seq %d: %v", next-1, err)
		case <-time.After(patience):
			t.Fatalf("no event %d in time", next)
		}
	}
}

// stop cancels the follow, checks that it returns the context's error and
// that nothing more came.
func (fl *following) stop(t *testing.T) {
	t.Helper()
	fl.cancel()
	if err := <-fl.done; !errors.Is(err, stdctx.Canceled) {
		t.Fatalf("a cancelled follow returned %v", err)
	}
	select {
	case e := <-fl.events:
		t.Fatalf("an extra event %d (a duplicate or one past the log)", e.Seq)
	default:
	}
}

// TestFollowerStreamsALogFromAnySeq: another host's follower reads session
// s1 from the start, from the middle and from its end, and follows the
// events appended meanwhile, each seq once.
func TestFollowerStreamsALogFromAnySeq(t *testing.T) {
	srv := startNATS(t)
	a := startWriter(t, srv.ClientURL())
	f, err := cluster.NewFollower(cluster.Options{URL: srv.ClientURL(), Stream: testStream, SubjectPrefix: testPrefix})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	// Another session's events between s1's: the stream interleaves
	// subjects, and a follow finds its place among them.
	say(t, a, "main", "first")
	say(t, a, "idle", "meanwhile")
	n1 := say(t, a, "main", "first again")
	stored(t, f, "s1", n1)
	k := n1 / 2

	all := follow(f, "s1", 0)
	mid := follow(f, "s1", k)
	tail := follow(f, "s1", n1)
	all.until(t, a, "main", 0, n1)
	mid.until(t, a, "main", k, n1)

	n2 := say(t, a, "main", "second")
	all.until(t, a, "main", n1, n2)
	mid.until(t, a, "main", n1, n2)
	tail.until(t, a, "main", n1, n2)
	stored(t, f, "s1", n2)
	all.stop(t)
	mid.stop(t)
	tail.stop(t)

	// A resume point past what is stored (the client saw events live from
	// their writer before their checkpoint) waits for the log to pass it.
	ahead := follow(f, "s1", n2+1)
	n3 := say(t, a, "main", "third")
	ahead.until(t, a, "main", n2+1, n3)
	ahead.stop(t)

	// Each follow removed its consumer from the server as it ended.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	st, err := js.Stream(stdctx.Background(), testStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(stdctx.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Consumers != 0 {
		t.Fatalf("%d consumers left on the stream", info.State.Consumers)
	}
}

// TestFollowerWaitsForALeasedSessionsFirstEvent: a session open on its
// host with nothing published yet is followed from its first event; one
// nobody has is SESSION_NOT_FOUND at once.
func TestFollowerWaitsForALeasedSessionsFirstEvent(t *testing.T) {
	srv := startNATS(t)
	a := startWriter(t, srv.ClientURL())
	f, err := cluster.NewFollower(cluster.Options{URL: srv.ClientURL(), Stream: testStream, SubjectPrefix: testPrefix})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	if last, err := f.LastSeq(stdctx.Background(), "s2"); err != nil || last != 0 {
		t.Fatalf("the leased, empty session s2 has last seq %d, error %v", last, err)
	}
	fl := follow(f, "s2", 0)
	n := say(t, a, "idle", "hello")
	fl.until(t, a, "idle", 0, n)
	fl.stop(t)

	if _, err := f.LastSeq(stdctx.Background(), "nobody"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("LastSeq of an unknown session: %v", err)
	}
	err = f.Follow(stdctx.Background(), "nobody", 0, func(session.Event) error { return nil })
	if !errs.HasCode(err, session.NotFound) {
		t.Fatalf("following an unknown session: %v", err)
	}
	if err := f.Follow(stdctx.Background(), "../x", 0, nil); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("following a malformed id: %v", err)
	}
}

// TestFollowEndsWithItsCallbackAndWithClose: fn's error ends the follow
// with that error; Close ends the follows in progress and waits for them.
func TestFollowEndsWithItsCallbackAndWithClose(t *testing.T) {
	srv := startNATS(t)
	a := startWriter(t, srv.ClientURL())
	f, err := cluster.NewFollower(cluster.Options{URL: srv.ClientURL(), Stream: testStream, SubjectPrefix: testPrefix})
	if err != nil {
		t.Fatal(err)
	}
	n := say(t, a, "main", "first")
	stored(t, f, "s1", n)

	enough := errors.New("enough")
	var got []int64
	err = f.Follow(stdctx.Background(), "s1", 0, func(e session.Event) error {
		got = append(got, e.Seq)
		if len(got) == 2 {
			return enough
		}
		return nil
	})
	if !errors.Is(err, enough) || len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("fn stopped the follow at %v with %v", got, err)
	}

	// Running once it delivered event n, then waiting for events that do
	// not come.
	fl := follow(f, "s1", n-1)
	fl.until(t, a, "main", n-1, n)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-fl.done:
		if !errs.HasCode(err, cluster.FollowerClosed) {
			t.Fatalf("a follow ended by Close returned %v", err)
		}
	case <-time.After(patience):
		t.Fatal("Close did not end a follow")
	}
	if err := f.Follow(stdctx.Background(), "s1", 0, nil); !errs.HasCode(err, cluster.FollowerClosed) {
		t.Fatalf("following after Close: %v", err)
	}
}

// TestFollowEndsWhenCancelledWithTheServerGone: a follow whose NATS server
// went away still ends when its context does, and Close returns.
func TestFollowEndsWhenCancelledWithTheServerGone(t *testing.T) {
	srv := startNATS(t)
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx := stdctx.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: testStream, Subjects: []string{testPrefix + ".>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, testPrefix+".s1", []byte(`{"seq":1,"type":"user/message","time":"2026-01-01T00:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}
	f, err := cluster.NewFollower(cluster.Options{URL: srv.ClientURL(), Stream: testStream, SubjectPrefix: testPrefix, ConnectTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fl := follow(f, "s1", 0)
	select {
	case e := <-fl.events:
		if e.Seq != 1 {
			t.Fatalf("first event %d", e.Seq)
		}
	case <-time.After(patience):
		t.Fatal("no event")
	}
	srv.Shutdown()
	srv.WaitForShutdown()
	fl.cancel()
	select {
	case err := <-fl.done:
		if !errors.Is(err, stdctx.Canceled) {
			t.Fatalf("a follow cancelled with the server gone returned %v", err)
		}
	case <-time.After(patience):
		t.Fatal("a follow did not end with its context while the server was gone")
	}
}
