package serve_test

import (
	stdctx "context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dsh-go/dsh/serve"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// streamed is what a test read from streams: the durable seqs in order,
// and the last id.
type streamed struct {
	seqs   []int64
	lastID string
	kinds  map[string]int
}

// consume reads s until stop says so (or the stream ends), checking every
// message against the document and the id rules.
func (e *env) consume(t *testing.T, s *eventStream, got *streamed, stop func(update) bool) {
	t.Helper()
	if got.kinds == nil {
		got.kinds = map[string]int{}
	}
	for {
		m, ok := s.next(t)
		if !ok {
			return
		}
		got.kinds[m.event]++
		if m.event == "ready" {
			e.doc.validate(t, "#/components/schemas/Ready", m.data, "ready")
			continue
		}
		if m.event == "end" {
			e.doc.validate(t, "#/components/schemas/End", m.data, "end")
			continue
		}
		if m.event == "drop" {
			e.doc.validate(t, "#/components/schemas/Drop", m.data, "drop")
			continue
		}
		e.doc.validate(t, "#/components/schemas/Update", m.data, "stream "+m.event)
		var u update
		if err := json.Unmarshal(m.data, &u); err != nil || u.Kind != m.event {
			t.Fatalf("message %q with data %s", m.event, m.data)
		}
		switch m.event {
		case "event":
			got.seqs = append(got.seqs, u.Seq)
			if !strings.HasPrefix(m.id, strconv.FormatInt(u.Seq, 10)+"-") {
				t.Fatalf("event %d with id %q", u.Seq, m.id)
			}
			got.lastID = m.id
		case "notice":
			got.lastID = m.id
		default:
			if m.id != "" {
				t.Fatalf("a %s message with id %q", m.event, m.id)
			}
		}
		if stop(u) {
			return
		}
	}
}

func isTurnEnd(u update) bool {
	return u.Kind == "event" && u.Event != nil && u.Event.Type == "turn/end"
}

// contiguous fails unless seqs are exactly 1..n.
func contiguous(t *testing.T, seqs []int64, n int) {
	t.Helper()
	if len(seqs) != n {
		t.Fatalf("%d events streamed, the log has %d: %v", len(seqs), n, seqs)
	}
	for i, s := range seqs {
		if s != int64(i+1) {
			t.Fatalf("seq %d at position %d (a gap or a duplicate): %v", s, i, seqs)
		}
	}
}

func words(n int) string { return strings.Repeat("word ", n) }

// A client that drops mid-answer and reconnects with Last-Event-ID gets
// every durable event once: no gap, no duplicate.
func TestStreamResumesWithoutGapOrDuplicate(t *testing.T) {
	e := newEnv(t, envOpts{delay: 200_000, extra: "  - use: tools.clock\n", replies: []scripted.Reply{
		{Text: words(20), ToolCalls: []scripted.Call{{Name: "clock"}}},
		{Text: words(20), ToolCalls: []scripted.Call{{Name: "clock"}}},
		{Text: words(40)},
	}})
	id := e.open(nil)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	s1 := e.stream(ctx, id, nil)
	if m, _ := s1.next(t); m.event != "ready" {
		t.Fatalf("first message %q", m.event)
	}
	e.send(id, "go", "go")
	var got streamed
	chunksAfter := 0
	e.consume(t, s1, &got, func(u update) bool {
		if len(got.seqs) >= 6 && u.Kind == "chunk" {
			chunksAfter++
		}
		return chunksAfter >= 3
	})
	s1.close()
	if got.kinds["chunk"] == 0 {
		t.Fatal("no chunk streamed before the drop")
	}
	s2 := e.stream(ctx, id, nil, "Last-Event-ID", got.lastID)
	defer s2.close()
	e.consume(t, s2, &got, isTurnEnd)
	evs := e.events(id)
	contiguous(t, got.seqs, len(evs))
	if got.kinds["ready"] != 1 || got.kinds["snapshot"] == 0 && got.kinds["chunk"] == 0 {
		t.Fatalf("kinds %v", got.kinds)
	}

	// ?after= does the same without the header; a bare seq is accepted.
	for _, hdr := range [][]string{{}, {"Last-Event-ID", "3"}} {
		path := ""
		if len(hdr) == 0 {
			path = "?after=3"
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", e.ts.URL+"/v1/sessions/"+id+"/stream"+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.token)
		if len(hdr) == 2 {
			req.Header.Set(hdr[0], hdr[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		s3 := &eventStream{resp: resp, msgs: make(chan streamMsg, 1024), done: make(chan struct{}), stop: make(chan struct{})}
		go s3.read()
		var from streamed
		m, _ := s3.next(t)
		var ready struct {
			LastSeq int64 `json:"last_seq"`
		}
		json.Unmarshal(m.data, &ready)
		if m.event != "ready" || ready.LastSeq != int64(len(evs)) {
			t.Fatalf("ready %q %s", m.event, m.data)
		}
		e.consume(t, s3, &from, isTurnEnd)
		s3.close()
		if len(from.seqs) != len(evs)-3 || from.seqs[0] != 4 {
			t.Fatalf("from seq 3: %v", from.seqs)
		}
	}
}

// A client too slow for the hub's buffer is re-attached by the server from
// the last seq it was sent: it still sees every seq once. (A stream buffer
// larger than the socket takes lets the server's writes block, and the
// hub's queue for it overflow, before the client is dropped; the drop has
// tests of its own.)
func TestSlowStreamSeesContiguousSeqs(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{Text: words(30000)}}, streamBuffer: 64 << 20})
	id := e.open(nil)
	// A receive buffer of a few KB: the server's writes block soon, and
	// the hub's queue for this client overflows while the turn runs.
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
	}}
	slow := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	defer slow.CloseIdleConnections()
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	s := e.streamPaused(ctx, id, slow)
	e.send(id, "long", "a long answer please")
	evs := e.waitEvents(id, "turn end", turnsEnded(1))
	s.start()
	defer s.close()
	var got streamed
	e.consume(t, s, &got, isTurnEnd)
	contiguous(t, got.seqs, len(evs))
	if !strings.Contains(e.log.String(), "re-attached from its last seq") {
		t.Fatalf("the stream never overflowed (kinds %v); the test did not test the re-attach", got.kinds)
	}
}

// An idle stream is pinged, and outlives the server's read timeout.
func TestStreamPingsAndOutlivesTheReadTimeout(t *testing.T) {
	t.Cleanup(serve.SetTimings(200*time.Millisecond, 40*time.Millisecond))
	e := newEnv(t, envOpts{})
	id := e.open(nil)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	s := e.stream(ctx, id, nil)
	defer s.close()
	if m, _ := s.next(t); m.event != "ready" {
		t.Fatalf("first %q", m.event)
	}
	// Ten pings: twice the read timeout has passed.
	deadline := time.Now().Add(patience)
	for s.pings.Load() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pings", s.pings.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.send(id, "late", "still there?")
	var got streamed
	e.consume(t, s, &got, isTurnEnd)
	contiguous(t, got.seqs, len(e.events(id)))
}

// TestAStreamOfASessionClosedHereEndsWithEnd: when the session closes on
// the server (a client closed it; in a cluster, the server lost it to
// another host) its streams say so before they end, so a client knows to
// reconnect rather than guess from a dropped connection.
func TestAStreamOfASessionClosedHereEndsWithEnd(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{Text: "done"}}})
	id := e.open(map[string]any{})
	e.send(id, "r1", "hi")
	e.waitEvents(id, "the turn's end", func(ev []eventOut) bool {
		return len(ev) > 0 && ev[len(ev)-1].Type == "turn/end"
	})
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 10*time.Second)
	defer cancel()
	s := e.stream(ctx, id, nil)
	var got streamed
	e.consume(t, s, &got, isTurnEnd)
	if r := e.call("POST", "/v1/sessions/"+id+"/close", map[string]any{}); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	var last streamMsg
	for {
		m, ok := s.next(t)
		if !ok {
			break
		}
		last = m
	}
	var end struct {
		Kind      string `json:"kind"`
		Session   string `json:"session"`
		LastSeq   int64  `json:"last_seq"`
		Reconnect bool   `json:"reconnect"`
	}
	if last.event != "end" || json.Unmarshal(last.data, &end) != nil || end.Session != id || !end.Reconnect || end.LastSeq != got.seqs[len(got.seqs)-1] {
		t.Fatalf("the stream's last message: %q %s (last seq streamed %v)", last.event, last.data, got.seqs)
	}
	e.doc.validate(t, "#/components/schemas/End", last.data, "end")
}
