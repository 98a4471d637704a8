package serve_test

import (
	"bufio"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/serve"
)

// stalledReader is a client on a real TCP connection with a 4 KiB
// receive buffer that reads a stream's ready message and then nothing,
// until told to read the rest.
type stalledReader struct {
	conn net.Conn
	sse  *loadSSEReader
}

func dialStalled(t *testing.T, addr, token, id, lastID string) *stalledReader {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return errors.Join(err, serr)
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	req := fmt.Sprintf("GET /v1/sessions/%s/stream HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n", id, addr, token)
	if lastID != "" {
		req += "Last-Event-ID: " + lastID + "\r\n"
	}
	if _, err := conn.Write([]byte(req + "\r\n")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReaderSize(conn, 16), nil)
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", res, err)
	}
	s := &stalledReader{conn: conn, sse: newLoadSSEReader(res.Body)}
	if m, err := s.sse.next(); err != nil || m.Event != "ready" {
		t.Fatalf("first message %q, %v; want ready", m.Event, err)
	}
	return s
}

// rest reads the stream to its end (within limit): the durable seqs it
// held in order, the id of the last message that had one, and its last
// message.
func (s *stalledReader) rest(t *testing.T, limit time.Duration) (seqs []int64, lastID string, last loadSSEMessage, err error) {
	t.Helper()
	s.conn.SetReadDeadline(time.Now().Add(limit))
	for {
		m, err := s.sse.next()
		if err != nil {
			return seqs, lastID, last, err
		}
		last = m
		if m.ID != "" {
			lastID = m.ID
		}
		if m.Event == "event" {
			var u loadUpdate
			if json.Unmarshal(m.Data, &u) != nil {
				t.Fatalf("event data %q", m.Data)
			}
			seqs = append(seqs, u.Seq)
		}
	}
}

// longPrompt is a prompt the scripted model echoes word by word: n
// chunks, each a stream message of some 200 bytes.
func longPrompt(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%05dxxxxx ", i)
	}
	return b.String()
}

// wantContiguous fails unless the seqs of two connections together are
// 1..last, each once.
func wantContiguous(t *testing.T, first, second []int64, last int64) {
	t.Helper()
	all := append(append([]int64(nil), first...), second...)
	for i, s := range all {
		if s != int64(i)+1 {
			t.Fatalf("seqs %v then %v: position %d holds %d (want 1..%d, each once)", first, second, i, s, last)
		}
	}
	if int64(len(all)) != last {
		t.Fatalf("seqs %v then %v: %d in all, want 1..%d", first, second, len(all), last)
	}
}

// bystanders are subscribers that keep reading — one of the stalled
// reader's session, one of another session, whose prompts arrive every
// 100ms while the stalled reader holds its connection — and the timer of
// those prompts.
type bystanders struct {
	same, other *loadSubscriber
	otherID     string
	mu          sync.Mutex
	sent        map[string]time.Time
	posted      []string
}

func startBystanders(t *testing.T, env *loadEnv, id string) (*bystanders, stdctx.Context) {
	b := &bystanders{otherID: env.newSession(t), sent: map[string]time.Time{}}
	at := func(rid string) (time.Time, bool) {
		b.mu.Lock()
		defer b.mu.Unlock()
		ts, ok := b.sent[rid]
		return ts, ok
	}
	b.same = newLoadSubscriber(env.base, env.token, id, env.streams, 0, at)
	b.other = newLoadSubscriber(env.base, env.token, b.otherID, env.streams, 0, at)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	for _, s := range []*loadSubscriber{b.same, b.other} {
		wg.Go(func() { s.run(ctx) })
		select {
		case <-s.ready:
		case <-time.After(30 * time.Second):
			t.Fatal("no ready within 30s")
		}
	}
	return b, ctx
}

// prompt sends the other session a prompt and notes when.
func (b *bystanders) prompt(t *testing.T, ctx stdctx.Context, env *loadEnv) {
	rid := "other-" + strconv.Itoa(len(b.posted))
	b.mu.Lock()
	b.sent[rid] = time.Now()
	b.mu.Unlock()
	b.posted = append(b.posted, rid)
	if code, err := env.post(ctx, b.otherID, rid, "are you there"); err != nil || code != http.StatusAccepted {
		t.Fatalf("prompt %s: %d %v", rid, code, err)
	}
}

// check waits until both bystanders hold everything, then holds them to
// the contract and the other session's prompts to being seen within 3s.
func (b *bystanders) check(t *testing.T, env *loadEnv, id string, lastA int64) {
	t.Helper()
	env.waitIdle(t, []string{b.otherID})
	var st struct {
		LastSeq int64 `json:"last_seq"`
	}
	if _, err := env.call(stdctx.Background(), http.MethodGet, "/v1/sessions/"+b.otherID, nil, &st); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !b.same.caughtUp(lastA) || !b.other.caughtUp(st.LastSeq) {
		if time.Now().After(deadline) {
			t.Fatalf("after 30s the bystanders hold seq %d of %d and %d of %d", b.same.lastSeqNow(), lastA, b.other.lastSeqNow(), st.LastSeq)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for name, s := range map[string]*loadSubscriber{"same session": b.same, "other session": b.other} {
		s.mu.Lock()
		if s.gaps+s.doubles > 0 || len(s.problems) > 0 {
			t.Errorf("%s: %d gaps, %d doubles; %q", name, s.gaps, s.doubles, s.problems)
		}
		s.mu.Unlock()
	}
	b.other.mu.Lock()
	defer b.other.mu.Unlock()
	if len(b.other.userLat) != len(b.posted) {
		t.Fatalf("the other session's subscriber saw %d of %d prompts live", len(b.other.userLat), len(b.posted))
	}
	for i, d := range b.other.userLat {
		if d > 3*time.Second {
			t.Errorf("the other session's prompt %d reached its subscriber %v after it was sent: the stalled reader held it up", i, d)
		}
	}
}

// A client that stops reading while its session streams is dropped once
// it leaves more than the stream's buffer unread: the stream's last
// message, `drop`, names the last id it sent, and resuming from it with
// Last-Event-ID gets exactly the events after it. Meanwhile a subscriber
// of the same session and one of another keep receiving on time.
func TestAStalledReaderIsDroppedAndResumes(t *testing.T) {
	const buffer = 64 << 10
	env := startLoadEnvWith(t, loadEnvOptions{delay: 500 * time.Microsecond, streamBuffer: buffer})
	addr := strings.TrimPrefix(env.base, "http://")
	id := env.newSession(t)
	b, ctx := startBystanders(t, env, id)
	stalled := dialStalled(t, addr, env.token, id, "")

	// 3,000 chunks of some 200 bytes: ten times the buffer.
	if code, err := env.post(ctx, id, "long", longPrompt(3000)); err != nil || code != http.StatusAccepted {
		t.Fatalf("prompt: %d %v", code, err)
	}
	for range 10 {
		b.prompt(t, ctx, env)
		time.Sleep(100 * time.Millisecond)
	}
	env.waitIdle(t, []string{id})
	var st struct {
		LastSeq int64 `json:"last_seq"`
	}
	if _, err := env.call(ctx, http.MethodGet, "/v1/sessions/"+id, nil, &st); err != nil {
		t.Fatal(err)
	}

	// The server ended the stream: it is read to its end, not to the
	// deadline.
	seqs, lastID, last, err := stalled.rest(t, 10*time.Second)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("reading the stalled stream: %v; want its end", err)
	}
	var drop struct {
		Kind      string `json:"kind"`
		Session   string `json:"session"`
		LastID    string `json:"last_id"`
		LastSeq   int64  `json:"last_seq"`
		Reconnect bool   `json:"reconnect"`
		Code      string `json:"code"`
		Message   string `json:"message"`
	}
	if last.Event != "drop" || json.Unmarshal(last.Data, &drop) != nil {
		t.Fatalf("the stalled stream's last message: %q %s; want drop", last.Event, last.Data)
	}
	heldSeq := int64(0)
	if len(seqs) > 0 {
		heldSeq = seqs[len(seqs)-1]
	}
	if drop.Kind != "drop" || drop.Session != id || drop.LastID != lastID || drop.LastSeq != heldSeq || !drop.Reconnect || drop.Code != string(serve.StreamBehind) || drop.Message == "" {
		t.Fatalf("drop %s; the client holds id %q, seq %d", last.Data, lastID, heldSeq)
	}
	if heldSeq >= st.LastSeq {
		t.Fatalf("the stalled reader was sent every seq (%d of %d) before its drop: the buffer bounded nothing", heldSeq, st.LastSeq)
	}

	again := dialStalled(t, addr, env.token, id, drop.LastID)
	if _, err := env.call(ctx, http.MethodPost, "/v1/sessions/"+id+"/close", nil, nil); err != nil {
		t.Fatal(err)
	}
	rest, _, end, err := again.rest(t, 30*time.Second)
	if errors.Is(err, os.ErrDeadlineExceeded) || end.Event != "end" {
		t.Fatalf("the resumed stream: %v, last message %q %s", err, end.Event, end.Data)
	}
	wantContiguous(t, seqs, rest, st.LastSeq)
	b.check(t, env, id, st.LastSeq)
}

// Where the stream cannot see its socket's send queue (here: a handler
// served by another http.Server), a client that stops reading blocks a
// write once the socket's buffers are full; after the write timeout the
// connection is cut, and the client resumes from the last whole message
// it received with nothing lost or doubled.
func TestAStalledReaderIsCutAfterTheWriteTimeout(t *testing.T) {
	env := startLoadEnvWith(t, loadEnvOptions{delay: 500 * time.Microsecond})
	srv, err := serve.New(serve.Options{Sessions: env.host.Sessions(), Config: env.host.Config(), Token: env.token,
		Log: slog.New(slog.DiscardHandler), StreamWriteTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler()}
	go hs.Serve(loadSmallSendBuffers{Listener: l, size: 16 << 10})
	t.Cleanup(func() {
		ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		hs.Shutdown(ctx)
	})

	id := env.newSession(t)
	b, ctx := startBystanders(t, env, id)
	stalled := dialStalled(t, l.Addr().String(), env.token, id, "")
	if code, err := env.post(ctx, id, "long", longPrompt(3000)); err != nil || code != http.StatusAccepted {
		t.Fatalf("prompt: %d %v", code, err)
	}
	for range 10 {
		b.prompt(t, ctx, env)
		time.Sleep(100 * time.Millisecond)
	}
	env.waitIdle(t, []string{id})
	var st struct {
		LastSeq int64 `json:"last_seq"`
	}
	if _, err := env.call(ctx, http.MethodGet, "/v1/sessions/"+id, nil, &st); err != nil {
		t.Fatal(err)
	}
	// The turn ended seconds ago: the write blocked on the full socket
	// has long timed out and the connection is closed.
	seqs, lastID, last, err := stalled.rest(t, 10*time.Second)
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("reading the stalled stream: %v; want its end", err)
	}
	if last.Event == "drop" || last.Event == "end" {
		t.Fatalf("the stream was cut, yet its last message is %q", last.Event)
	}
	if len(seqs) > 0 && seqs[len(seqs)-1] >= st.LastSeq {
		t.Fatalf("the stalled reader was sent every seq (%d) before it was cut", st.LastSeq)
	}
	again := dialStalled(t, l.Addr().String(), env.token, id, lastID)
	if _, err := env.call(ctx, http.MethodPost, "/v1/sessions/"+id+"/close", nil, nil); err != nil {
		t.Fatal(err)
	}
	rest, _, end, err := again.rest(t, 30*time.Second)
	if errors.Is(err, os.ErrDeadlineExceeded) || end.Event != "end" {
		t.Fatalf("the resumed stream: %v, last message %q %s", err, end.Event, end.Data)
	}
	wantContiguous(t, seqs, rest, st.LastSeq)
	b.check(t, env, id, st.LastSeq)
}
