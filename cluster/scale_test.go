package cluster_test

import (
	stdctx "context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/natstest"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/llm"
	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

var (
	adoptSessions = flag.Int("cluster.sessions", 0, "TestADeadHostsSessionsAreAdoptedTogether: stored sessions (default 100, 10 under -race; the issue's figure is 1000)")
	adoptProfile  = flag.String("cluster.adopt.cpuprofile", "", "TestADeadHostsSessionsAreAdoptedTogether: write a CPU profile of the adoption alone to this file")
)

// turnEvents is one whole turn as the agent loop logs it.
func turnEvents(first int64, turn int, now time.Time) []session.Event {
	return []session.Event{
		{Seq: first, Type: session.TurnStart, Turn: turn, Time: now},
		{Seq: first + 1, Type: session.UserMessage, Turn: turn, Time: now, Message: &llm.Message{Role: llm.RoleUser, Content: "prompt " + strconv.Itoa(turn)}},
		{Seq: first + 2, Type: session.StepStart, Turn: turn, Step: 1, Time: now},
		{Seq: first + 3, Type: session.AssistantMessage, Turn: turn, Step: 1, Time: now, Finish: llm.FinishStop, Message: &llm.Message{Role: llm.RoleAssistant, Content: "answer " + strconv.Itoa(turn)}},
		{Seq: first + 4, Type: session.StepEnd, Turn: turn, Step: 1, Time: now},
		{Seq: first + 5, Type: session.TurnEnd, Turn: turn, Time: now, Reason: "completed"},
	}
}

// storeLogs publishes n sessions of turns whole turns each straight into
// the stream, as a host that wrote them and died would have left them.
func storeLogs(t testing.TB, srv *server.Server, stream string, n, turns int) []string {
	t.Helper()
	js := natstest.JetStream(t, srv.ClientURL())
	ids := make([]string, n)
	now := time.Now().UTC()
	var acks []jetstream.PubAckFuture
	for i := range ids {
		ids[i] = fmt.Sprintf("big%04d", i)
		subject := natsplugin.Subject("dsh.t."+stream, ids[i])
		for turn := 1; turn <= turns; turn++ {
			for _, e := range turnEvents(int64(6*(turn-1)+1), turn, now) {
				m := nats.NewMsg(subject)
				m.Data, _ = json.Marshal(e)
				m.Header.Set("Dsh-Agent", "main")
				f, err := js.PublishMsgAsync(m)
				if err != nil {
					t.Fatal(err)
				}
				acks = append(acks, f)
				if len(acks)%1000 == 0 {
					select {
					case <-js.PublishAsyncComplete():
					case <-time.After(patience):
						t.Fatal("publishes were not acknowledged")
					}
				}
			}
		}
	}
	for _, f := range acks {
		select {
		case <-f.Ok():
		case err := <-f.Err():
			t.Fatal(err)
		case <-time.After(patience):
			t.Fatal("a publish was not acknowledged")
		}
	}
	return ids
}

// TestADeadHostsSessionsAreAdoptedTogether: a host died holding many
// sessions of ~100 events; once their leases run out, the live hosts
// resume all of them within lease_ttl + 2 s of its death, each claim
// looking its session up as serve does (through the store's listing).
// Adoptions used to run one after the other, each reading every stored
// log. -cluster.sessions=1000 is the figure.
func TestADeadHostsSessionsAreAdoptedTogether(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	n := *adoptSessions
	if n == 0 {
		n = 100
		if raceSlows {
			n = 10
		}
	}
	a := startNode(t, srv, stream, "a", nodeOpts{lookup: true})
	b := startNode(t, srv, stream, "b", nodeOpts{lookup: true})
	ids := storeLogs(t, srv, stream, n, 16)
	// Written behind the store's back, the logs have no index entries: the
	// first listing writes them, as a host's writer would have.
	if list, err := a.h.Sessions().List(ctxT(t)); err != nil || len(list) != n {
		t.Fatalf("listing the stored sessions: %d, %v", len(list), err)
	}
	died := killLeases(t, srv, stream, ids)
	cpu0 := cpuTime()
	if *adoptProfile != "" {
		f, err := os.Create(*adoptProfile)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			t.Fatal(err)
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	// Polled until all are adopted, past the deadline too, so that a miss
	// says by how much.
	due := died.Add(leaseTTL + 2*time.Second)
	var first, atDue time.Duration
	late := -1
	for {
		open := 0
		for _, id := range ids {
			_, onA := a.h.Sessions().Get(id)
			_, onB := b.h.Sessions().Get(id)
			if onA || onB {
				open++
			}
		}
		if open > 0 && first == 0 {
			first = time.Since(died)
		}
		if late < 0 && time.Now().After(due) {
			late, atDue = open, time.Since(died)
		}
		if open == n {
			break
		}
		if time.Since(died) > patience {
			t.Fatalf("%d of %d sessions adopted %s after their host's death", open, n, time.Since(died).Round(10*time.Millisecond))
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The CPU time counts the whole process from the last lease on: both
	// hosts and the NATS server.
	all, cpu := time.Since(died), cpuTime()-cpu0
	t.Logf("%d sessions of 96 events adopted %s after their host's death (lease_ttl %s), the first at %s; %s of CPU",
		n, all.Round(10*time.Millisecond), leaseTTL, first.Round(10*time.Millisecond), cpu.Round(time.Millisecond))
	floors(t, srv, stream, ids)
	if late >= 0 {
		t.Errorf("%d of %d sessions adopted %s after their host's death; want all within lease_ttl (%s) + 2s", late, n, atDue.Round(10*time.Millisecond), leaseTTL)
	}
	for _, nd := range []*node{a, b} {
		if ss, ok := nd.h.Sessions().Get(ids[n-1]); ok {
			if got := len(ss.Log().Events(1)); got != 96 {
				t.Fatalf("the adopted session holds %d events, want 96", got)
			}
		}
	}
}

// floors logs, beside an adoption's figures, what the same number of bare
// requests costs on the same server, in parallel as adopters run: a KV get
// of each lease, and a direct get of each log's last message.
func floors(t *testing.T, srv *server.Server, stream string, ids []string) {
	js := natstest.JetStream(t, srv.ClientURL())
	kv := leases(t, srv, stream)
	st, err := js.Stream(ctxT(t), stream)
	if err != nil {
		t.Fatal(err)
	}
	run := func(what string, get func(ctx stdctx.Context, id string) error) {
		next := make(chan string)
		var wg sync.WaitGroup
		failed := make(chan error, 1)
		start, cpu0 := time.Now(), cpuTime()
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := range next {
					ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
					if err := get(ctx, id); err != nil {
						select {
						case failed <- err:
						default:
						}
					}
					cancel()
				}
			}()
		}
		for _, id := range ids {
			next <- id
		}
		close(next)
		wg.Wait()
		select {
		case err := <-failed:
			t.Fatalf("floor %s: %v", what, err)
		default:
		}
		t.Logf("floor: %d %s in %s, %s of CPU", len(ids), what, time.Since(start).Round(time.Millisecond), (cpuTime() - cpu0).Round(time.Millisecond))
	}
	run("KV gets of a lease", func(ctx stdctx.Context, id string) error {
		_, err := kv.Get(ctx, id)
		return err
	})
	run("direct gets of a log's last message", func(ctx stdctx.Context, id string) error {
		_, err := st.GetLastMsgForSubject(ctx, natsplugin.Subject("dsh.t."+stream, id))
		return err
	})
	// What a resume cannot do without: its log, read and decoded; here in
	// one request, without the messages' headers.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	run("whole logs read by one batched direct get without headers and decoded", func(ctx stdctx.Context, id string) error {
		sub, err := nc.SubscribeSync(nc.NewInbox())
		if err != nil {
			return err
		}
		defer sub.Unsubscribe()
		req := fmt.Sprintf(`{"seq":1,"next_by_subj":%q,"batch":512,"no_hdr":true}`, natsplugin.Subject("dsh.t."+stream, id))
		if err := nc.PublishRequest("$JS.API.DIRECT.GET."+stream, sub.Subject, []byte(req)); err != nil {
			return err
		}
		var events []session.Event
		for {
			m, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				return err
			}
			if len(m.Data) == 0 && m.Header.Get("Status") != "" {
				if len(events) != 96 {
					return fmt.Errorf("read %d events of %s, want 96", len(events), id)
				}
				return nil
			}
			var e session.Event
			if err := json.Unmarshal(m.Data, &e); err != nil {
				return err
			}
			events = append(events, e)
		}
	})
}

// killLeases writes the leases of ids as a host that then died would have
// left them, and returns when the last was written: they expire a TTL
// after it (the first ones earlier by the time the writes took, which is
// logged).
func killLeases(t *testing.T, srv *server.Server, stream string, ids []string) time.Time {
	kv := leases(t, srv, stream)
	dead, _ := json.Marshal(natsplugin.LeaseRecord{Holder: "a dead host", HostID: "dead", Since: time.Now()})
	var wg sync.WaitGroup
	errs := make(chan error, len(ids))
	next := make(chan string)
	started := time.Now()
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
				if _, err := kv.Create(ctx, id, dead); err != nil {
					errs <- err
				}
				cancel()
			}
		}()
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	died := time.Now()
	t.Logf("%d leases created in %s", len(ids), died.Sub(started).Round(time.Millisecond))
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return died
}

// TestAdoptionMakesNoConsumerPerSession: adopting a dead host's sessions
// creates no JetStream consumer per session. Each resume used to make two
// — one to read the log, one to watch the queue bucket — and a clustered
// server creates and deletes each through its meta leader, which a
// thousand adoptions at once overwhelmed. The JetStream API requests per
// adoption are logged.
func TestAdoptionMakesNoConsumerPerSession(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	const n = 20
	a := startNode(t, srv, stream, "a", nodeOpts{lookup: true})
	b := startNode(t, srv, stream, "b", nodeOpts{lookup: true})
	ids := storeLogs(t, srv, stream, n, 16)
	if list, err := a.h.Sessions().List(ctxT(t)); err != nil || len(list) != n {
		t.Fatalf("listing the stored sessions: %d, %v", len(list), err)
	}
	// A plain subscription sees a copy of every API request.
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	var mu sync.Mutex
	counts := map[string]int{}
	sub, err := nc.Subscribe("$JS.API.>", func(m *nats.Msg) {
		kind := strings.Split(strings.TrimPrefix(m.Subject, "$JS.API."), ".")[0]
		if kind == "DIRECT" || kind == "STREAM" {
			kind += "." + strings.Split(m.Subject, ".")[3]
		}
		mu.Lock()
		counts[kind]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	killLeases(t, srv, stream, ids)
	eventually(t, "the sessions to be adopted", func() bool {
		for _, id := range ids {
			_, onA := a.h.Sessions().Get(id)
			_, onB := b.h.Sessions().Get(id)
			if !onA && !onB {
				return false
			}
		}
		return true
	})
	nc.Flush()
	mu.Lock()
	defer mu.Unlock()
	total := 0
	for _, c := range counts {
		total += c
	}
	t.Logf("JetStream API requests for %d adoptions (both hosts): %v; %.1f per adoption", n, counts, float64(total)/n)
	// The hosts' two watches were made when they joined; one re-made after
	// a reset is not a consumer per session.
	if c := counts["CONSUMER"]; c > 2 {
		t.Errorf("adopting %d sessions sent %d consumer requests; want none per session", n, c)
	}
}
