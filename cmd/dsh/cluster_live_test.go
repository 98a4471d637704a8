package main

import (
	"bufio"
	"bytes"
	stdctx "context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/cluster"
	"github.com/dsh-go/dsh/internal/natstest"
	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/session"
	"github.com/nats-io/nats.go/jetstream"
)

// clusterLiveLong makes TestClusterLiveStreamsMatchTheLog issue 29's size:
// more sessions and clients, several rounds of stalls, and the loss of a
// NATS node.
var clusterLiveLong = flag.Bool("cluster.long", false, "TestClusterLiveStreamsMatchTheLog: 12 sessions, 24 clients, 3 rounds of SIGSTOP, a NATS node lost")

// clusterLiveNodeLoss adds the NATS node loss of the long run to the
// short one.
var clusterLiveNodeLoss = flag.Bool("cluster.nodeloss", false, "TestClusterLiveStreamsMatchTheLog: stop the stream leader's NATS node mid-turn (always on with -cluster.long)")

const liveToken = "cluster-live-token-77a1"

// TestClusterLiveStreamsMatchTheLog runs three dsh serve processes on a
// 3-node JetStream cluster with SSE clients following every session, half
// of them through the session's owner. Mid-turn the owner is SIGKILLed;
// later, mid-turn, the new owner is SIGSTOPped past its lease and then
// woken. Clients reconnect to another host with Last-Event-ID whenever
// their stream ends. At the end, every client must hold exactly the log
// as JetStream stores it: the same event under each seq, nothing the log
// lacks, the interrupted turns' ends included. The woken host ends its
// streams with an `end` message and writes nothing more; a session opened
// on the killed host and never prompted lives on; a prompt queued on the
// killed host behind the running turn is run by the new owner.
func TestClusterLiveStreamsMatchTheLog(t *testing.T) {
	nSessions, perSession, stalls := 3, 2, 1
	if *clusterLiveLong {
		nSessions, perSession, stalls = 12, 2, 3
	}
	nc := natstest.Start(t, 3)
	path := filepath.Join(t.TempDir(), "config.yaml")
	words := make([]string, 100)
	for i := range words {
		words[i] = "w" + strconv.Itoa(i)
	}
	os.WriteFile(path, []byte(fmt.Sprintf(`plugins:
  - use: llm.scripted
    config:
      delay: 20ms
      replies: [{text: %q}]
agents:
  - id: main
    provider: scripted
cluster:
  nats: {url: %q}
  lease_ttl: 2s
  replicas: 3
log: {level: warn}
`, strings.Join(words, " "), nc.URLs())), 0o644)
	hosts := map[string]*serveProcess{}
	for _, id := range []string{"a", "b", "c"} {
		hosts[id] = startServe(t, path, "DSH_SERVE_TOKEN="+liveToken, "DSH_CLUSTER__HOST_ID="+id)
	}
	logs := func() string {
		var b strings.Builder
		for _, id := range []string{"a", "b", "c"} {
			fmt.Fprintf(&b, "--- host %s:\n%s", id, hosts[id].log.String())
		}
		return b.String()
	}
	var ids []string
	for i := range nSessions {
		ids = append(ids, fmt.Sprintf("live%d", i))
	}
	for _, id := range append(ids, "quiet") {
		if code, out := liveCall(t, hosts["a"].base, "POST", "/v1/sessions", `{"session_id":"`+id+`"}`); code != 201 {
			t.Fatalf("open %s on a: %d %s", id, code, out)
		}
	}

	ctx, stop := stdctx.WithCancel(stdctx.Background())
	var wg sync.WaitGroup
	var followers []*follower
	order := [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}}
	for i, id := range ids {
		for j := range perSession {
			f := &follower{session: id, hosts: hosts, order: order[(i+j)%3]}
			if j == 0 {
				f.order = order[0] // one client of each session follows its owner
			}
			followers = append(followers, f)
			wg.Add(1)
			go func() { defer wg.Done(); f.run(ctx) }()
		}
	}
	defer func() { stop(); wg.Wait() }()

	// Round 1: every session mid-turn on a, a killed.
	prompt := func(via, id, req string) string {
		t.Helper()
		code, out := liveCall(t, hosts[via].base, "POST", "/v1/sessions/"+id+"/messages", `{"request_id":"`+req+`","content":"`+req+`"}`)
		if code != 202 {
			t.Fatalf("prompt %s through %s: %d %s\n%s", id, via, code, out, logs())
		}
		return out
	}
	// (d) Behind each turn a second prompt waits in a's inbox.
	js := natstest.JetStream(t, nc.URLs())
	for _, id := range ids {
		prompt("b", id, id+"-kill")
	}
	// Once each turn runs (its prompt stored), a second prompt is queued
	// behind it rather than taken into it.
	for _, id := range ids {
		awaitRequest(t, js, id, id+"-kill", logs)
	}
	firstAnswer := map[string]string{}
	for _, id := range ids {
		firstAnswer[id] = prompt("c", id, id+"-queued")
	}
	time.Sleep(300 * time.Millisecond)
	hosts["a"].cmd.Process.Kill()
	hosts["a"].cmd.Wait()
	alive := []string{"b", "c"}
	for _, id := range ids {
		// The new owner ran the queued prompt, once, in a turn of its own.
		awaitIdle(t, js, id, 2, logs)
		var queuedIn []int
		var msgID string
		for _, e := range readLiveLog(t, js, id) {
			// The prompt's message/queued record (turn 1, on the killed
			// host) is not a run of it; its user/message is.
			if e.RequestID == id+"-queued" && (e.Type == session.UserMessage || e.Type == session.SteeringMessage) {
				queuedIn = append(queuedIn, e.Turn)
				if e.Message != nil {
					msgID = e.Message.ID
				}
			}
		}
		if len(queuedIn) != 1 || queuedIn[0] != 2 {
			t.Fatalf("the prompt queued on the killed host is in turns %v of %s, want [2]", queuedIn, id)
		}
		// Its retry (the same text: another under its id is refused)
		// answers with what the log records.
		code, out := liveCall(t, hosts["b"].base, "POST", "/v1/sessions/"+id+"/messages", `{"request_id":"`+id+`-queued","content":"`+id+`-queued"}`)
		if code != 202 || msgID == "" || !strings.Contains(out, msgID) {
			t.Fatalf("the retry of the queued prompt: %d %s, the log's message id %q", code, out, msgID)
		}
		if out != firstAnswer[id] {
			t.Logf("the queued prompt was accepted as %s and is recorded as %s", firstAnswer[id], out)
		}
	}

	// (c) A session opened on a and never prompted outlived it.
	prompt("b", "quiet", "quiet-1")
	awaitIdle(t, js, "quiet", 1, logs)

	// Rounds of stalls: the owner of the first session is stopped
	// mid-turn past its lease, and woken once another host took over.
	for round := range stalls {
		turn := round + 3
		owner := ownerOf(t, path, ids[0])
		other := alive[0]
		if other == owner {
			other = alive[1]
		}
		for _, id := range ids {
			prompt(other, id, fmt.Sprintf("%s-stall%d", id, round))
		}
		// A client that follows the first session on its owner when the
		// owner stops.
		watcher := &follower{session: ids[0], hosts: hosts, order: []string{owner, other}}
		followers = append(followers, watcher)
		wg.Add(1)
		go func() { defer wg.Done(); watcher.run(ctx) }()
		time.Sleep(700 * time.Millisecond)
		p := hosts[owner]
		p.cmd.Process.Signal(syscall.SIGSTOP)
		// The lease runs out (2s) and another host adopts the session.
		deadline := time.Now().Add(30 * time.Second)
		for ownerOf(t, path, ids[0]) == owner {
			if time.Now().After(deadline) {
				t.Fatalf("nobody took %s from the stopped host %s\n%s", ids[0], owner, logs())
			}
			time.Sleep(100 * time.Millisecond)
		}
		woke := time.Now()
		p.cmd.Process.Signal(syscall.SIGCONT)
		for _, id := range ids {
			awaitIdle(t, js, id, turn, logs)
		}
		// The woken host let go of its copy: its client was told to
		// reconnect, promptly.
		watcher.awaitEnd(t, owner, woke, 10*time.Second, logs)
	}

	// A NATS node lost mid-turn: the stream's leader, stopped and, after a
	// while, started again. The sessions' logs are kept by all three.
	if *clusterLiveLong || *clusterLiveNodeLoss {
		turn := stalls + 3
		for _, id := range ids {
			prompt(alive[0], id, id+"-nodeloss")
		}
		time.Sleep(700 * time.Millisecond)
		leader := nc.StreamLeader(cluster.DefaultStream)
		nc.StopNode(leader)
		time.Sleep(3 * time.Second)
		nc.RestartNode(leader)
		for _, id := range ids {
			awaitIdle(t, js, id, turn, logs)
		}
	}

	// Every client ends up with exactly the log.
	for _, f := range followers {
		want := readLiveLog(t, js, f.session)
		f.await(t, int64(len(want)), 30*time.Second, logs)
		f.check(t, want)
	}
	interrupted := 0
	for _, id := range ids {
		for _, e := range readLiveLog(t, js, id) {
			if e.Type == session.TurnEnd && e.Reason == "interrupted" {
				interrupted++
			}
		}
	}
	if interrupted < len(ids) {
		t.Fatalf("%d interrupted turns in the logs of %d sessions killed mid-turn", interrupted, len(ids))
	}
}

// liveCall makes one authorized request.
func liveCall(t *testing.T, base, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+liveToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}

// ownerOf names the host holding session id's lease ("" for none).
func ownerOf(t *testing.T, cfg, id string) string {
	t.Helper()
	out := runDsh(t, "", "--config", cfg, "cluster", "status", "--json")
	var rep cluster.Report
	if err := json.Unmarshal([]byte(out.stdout), &rep); err != nil {
		t.Fatalf("cluster status: %v %+v", err, out)
	}
	for _, hs := range rep.Hosts {
		for _, l := range hs.Sessions {
			if l.Session == id {
				return l.HostID
			}
		}
	}
	for _, l := range rep.Orphaned {
		if l.Session == id {
			return l.HostID
		}
	}
	return ""
}

// readLiveLog reads session id's log from JetStream, as a new owner would.
func readLiveLog(t *testing.T, js jetstream.JetStream, id string) []session.Event {
	t.Helper()
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, cluster.DefaultStream)
	if err != nil {
		t.Fatal(err)
	}
	subject := natsplugin.Subject("dsh.sessions", id)
	last, err := st.GetLastMsgForSubject(ctx, subject)
	if err != nil {
		t.Fatalf("the log of %s: %v", id, err)
	}
	var out []session.Event
	for next := uint64(1); next <= last.Sequence; {
		m, err := st.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			t.Fatal(err)
		}
		next = m.Sequence + 1
		if natsplugin.IsOpenRecord(m.Header) {
			continue
		}
		var e session.Event
		if err := json.Unmarshal(m.Data, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

// awaitRequest waits for session id's stored log to hold request rid.
func awaitRequest(t *testing.T, js jetstream.JetStream, id, rid string, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, e := range readLiveLog(t, js, id) {
			if e.RequestID == rid {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s never stored request %s\n%s", id, rid, logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// awaitIdle waits for session id's stored log to end with turn's end.
func awaitIdle(t *testing.T, js jetstream.JetStream, id string, turn int, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		ev := readLiveLog(t, js, id)
		if n := len(ev); n > 0 && ev[n-1].Type == session.TurnEnd && ev[n-1].Turn >= turn {
			return
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(ev)
			t.Fatalf("session %s never ended turn %d: %s\n%s", id, turn, b, logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// streamClient gives up on a host that accepts a connection and never
// answers: a stopped process's kernel still accepts.
var streamClient = &http.Client{Transport: &http.Transport{ResponseHeaderTimeout: 3 * time.Second}}

// follower is an SSE client of one session that reconnects, with its
// Last-Event-ID, to the next host whenever its stream ends.
type follower struct {
	session string
	hosts   map[string]*serveProcess
	order   []string

	mu  sync.Mutex
	got []json.RawMessage // got[i] is the event received under seq i+1
	bad []string          // what contradicted the contract as it came
	// ends are the hosts that ended a stream with an end message, when.
	ends map[string]time.Time
}

func (f *follower) run(ctx stdctx.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		h := f.order[i%len(f.order)]
		f.follow(ctx, h, f.hosts[h].base)
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// follow reads one stream from host h until it ends, or nothing at all
// (not even a ping) comes for a while: a stopped host's streams hang.
func (f *follower) follow(ctx stdctx.Context, h, base string) {
	rctx, cancel := stdctx.WithCancel(ctx)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, "GET", base+"/v1/sessions/"+f.session+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+liveToken)
	f.mu.Lock()
	req.Header.Set("Last-Event-ID", strconv.Itoa(len(f.got)))
	f.mu.Unlock()
	resp, err := streamClient.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return
	}
	alive := make(chan struct{}, 1)
	go func() {
		for {
			select {
			case <-rctx.Done():
				return
			case <-alive:
			case <-time.After(8 * time.Second):
				cancel()
				return
			}
		}
	}()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var kind string
	for sc.Scan() {
		select {
		case alive <- struct{}{}:
		default:
		}
		line := sc.Text()
		if k, ok := strings.CutPrefix(line, "event: "); ok {
			kind = k
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		switch kind {
		case "end":
			f.mu.Lock()
			if f.ends == nil {
				f.ends = map[string]time.Time{}
			}
			f.ends[h] = time.Now()
			f.mu.Unlock()
			return
		case "event":
			var u struct {
				Seq   int64           `json:"seq"`
				Event json.RawMessage `json:"event"`
			}
			if err := json.Unmarshal([]byte(data), &u); err != nil {
				f.fail("host %s sent an event that is not JSON: %v", h, err)
				continue
			}
			f.mu.Lock()
			if want := int64(len(f.got)) + 1; u.Seq != want {
				f.bad = append(f.bad, fmt.Sprintf("host %s sent seq %d where %d was next", h, u.Seq, want))
			} else {
				f.got = append(f.got, u.Event)
			}
			f.mu.Unlock()
		}
	}
}

func (f *follower) fail(format string, args ...any) {
	f.mu.Lock()
	f.bad = append(f.bad, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// await waits until the follower received n events.
func (f *follower) await(t *testing.T, n int64, d time.Duration, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		f.mu.Lock()
		got := int64(len(f.got))
		f.mu.Unlock()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a client of %s (first host %s) received %d of the log's %d events\n%s", f.session, f.order[0], got, n, logs())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// awaitEnd waits for host h to have ended this follower's stream with an
// end message, after since and within d of it.
func (f *follower) awaitEnd(t *testing.T, h string, since time.Time, d time.Duration, logs func() string) {
	t.Helper()
	for {
		f.mu.Lock()
		at, ok := f.ends[h]
		f.mu.Unlock()
		if ok && at.After(since) {
			t.Logf("host %s ended a stream of %s %v after it woke", h, f.session, at.Sub(since).Round(time.Millisecond))
			return
		}
		if time.Since(since) > d {
			t.Fatalf("the woken host %s did not end its stream of %s with an end message within %v\n%s", h, f.session, d, logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// check compares what the follower received with the stored log: the
// same event under every seq, and nothing else.
func (f *follower) check(t *testing.T, log []session.Event) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		t.Errorf("a client of %s (first host %s): %s", f.session, f.order[0], strings.Join(f.bad, "; "))
	}
	if len(f.got) != len(log) {
		t.Errorf("a client of %s (first host %s) holds %d events, the log %d", f.session, f.order[0], len(f.got), len(log))
	}
	for i := range min(len(f.got), len(log)) {
		var got session.Event
		if err := json.Unmarshal(f.got[i], &got); err != nil {
			t.Errorf("event %d of a client of %s: %v", i+1, f.session, err)
			continue
		}
		a, _ := json.Marshal(got)
		b, _ := json.Marshal(log[i])
		if !bytes.Equal(a, b) {
			t.Errorf("a client of %s (first host %s) holds under seq %d\n  %s\nwhere the log has\n  %s", f.session, f.order[0], i+1, a, b)
		}
	}
}
