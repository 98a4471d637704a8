package serve_test

import (
	"bufio"
	"bytes"
	stdctx "context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file is the load test's client: a Server-Sent Events reader that
// knows nothing of dsh, and a subscriber that checks, message by message,
// what the stream contract promises — contiguous durable seqs across
// reconnects, ids that name them, `ready` first — and notes when each
// prompt's events arrive.

// loadSSEMessage is one dispatched message of an event stream.
type loadSSEMessage struct {
	Event string
	ID    string
	Data  []byte
}

// loadSSEReader parses an event stream as the WHATWG spec says a browser does:
// fields per line, one optional space after the colon, comments ignored, a
// blank line dispatching.
type loadSSEReader struct {
	r *bufio.Reader
}

func newLoadSSEReader(r io.Reader) *loadSSEReader {
	return &loadSSEReader{r: bufio.NewReaderSize(r, 16<<10)}
}

// next returns the next message; comments (": ping") never reach the
// caller. Fields of a message cut short by EOF are dropped, as a browser
// drops them.
func (s *loadSSEReader) next() (loadSSEMessage, error) {
	var m loadSSEMessage
	var data [][]byte
	seen := false
	for {
		line, err := s.r.ReadSlice('\n')
		if err != nil && !(errors.Is(err, bufio.ErrBufferFull)) {
			return loadSSEMessage{}, err
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			// A line longer than the buffer: collect the rest of it.
			long := append([]byte(nil), line...)
			for errors.Is(err, bufio.ErrBufferFull) {
				line, err = s.r.ReadSlice('\n')
				long = append(long, line...)
			}
			if err != nil {
				return loadSSEMessage{}, err
			}
			line = long
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) == 0 {
			if !seen {
				continue
			}
			m.Data = bytes.Join(data, []byte("\n"))
			return m, nil
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		seen = true
		switch string(field) {
		case "event":
			m.Event = string(value)
		case "id":
			m.ID = string(value)
		case "data":
			data = append(data, append([]byte(nil), value...))
		}
	}
}

// loadUpdate is the part of a live.Update the subscriber checks; decoding
// only that keeps the client's share of the measured CPU small.
type loadUpdate struct {
	Kind  string `json:"kind"`
	Seq   int64  `json:"seq"`
	Event *struct {
		Seq       int64  `json:"seq"`
		Type      string `json:"type"`
		RequestID string `json:"request_id"`
		Message   *struct {
			ID      string `json:"id"`
			Content string `json:"content"`
		} `json:"message"`
	} `json:"event"`
	Chunk *struct {
		MessageID string `json:"message_id"`
		Index     int    `json:"index"`
		Chunk     struct {
			Kind string `json:"kind"`
			Text string `json:"text"`
		} `json:"chunk"`
	} `json:"chunk"`
	Snapshot *struct {
		MessageID string `json:"message_id"`
		Next      int    `json:"next"`
		Message   struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"snapshot"`
	Notice *struct {
		ID int64 `json:"id"`
	} `json:"notice"`
}

// loadReady is the data of the `ready` message.
type loadReady struct {
	Session string `json:"session"`
	LastSeq *int64 `json:"last_seq"`
}

// loadSubscriber is one SSE client of one session. It reconnects with
// Last-Event-ID when its stream ends, and every dropEvery durable events
// it drops its connection on purpose to prove the reconnect loses nothing.
type loadSubscriber struct {
	base, token, session string
	client               *http.Client
	// dropEvery > 0 drops the connection after that many messages on it.
	// afterQuery resumes with ?after=<seq> rather than Last-Event-ID, as
	// a client that is no browser may.
	dropEvery  int
	afterQuery bool
	// sentAt returns when the prompt with a request id was sent.
	sentAt func(requestID string) (time.Time, bool)
	// tap, when set, sees every message after `ready`, from the reading
	// goroutine. unchecked only decodes each message's data, as a floor's
	// client does whose frames repeat the same seqs.
	tap       func(loadSSEMessage)
	unchecked bool

	mu sync.Mutex
	// lastSeq is the last durable seq held, lastID the id line that goes
	// with it (what a browser sends back as Last-Event-ID).
	lastSeq    int64
	lastID     string
	lastNotice int64
	// ready is closed when the first connection's `ready` arrived.
	ready     chan struct{}
	readyOnce sync.Once
	// problems are contract violations, with what was seen.
	problems []string
	// gaps and doubles count seqs skipped or repeated.
	gaps, doubles int
	// prompts counts the user/message events per request id.
	prompts map[string]int
	// lastUser and lastAnswer are the seqs of the last user/message and
	// assistant/message.
	lastUser, lastAnswer int64
	// pending are the request ids seen live whose answer has not begun.
	pending []string
	// userLat and answerLat: prompt sent → its user/message, and → the
	// first chunk, snapshot or assistant/message after it (live only).
	userLat, answerLat []time.Duration
	// connects counts connections; drops the planned ones, ends the
	// streams the server ended, failures the connects that failed.
	connects, drops, ends, failures int
	events                          int
	// dropped counts the drop messages: the server dropped this client
	// for leaving more than its buffer unread.
	dropped int
	// streams are the messages being streamed on this connection, by
	// message id: the text assembled from the snapshot and chunks, and
	// the index of the next chunk. assembled counts the messages whose
	// assembled text matched their assistant/message, partial those of
	// which it was a strict prefix; chunkFaults the chunks out of order.
	// A connection's backlog holds durable events only: a snapshot after a
	// chunk or snapshot of the same connection (streamedHere) means the
	// server re-attached to the hub mid-stream (resnapshots).
	streams      map[string]*loadStream
	assembled    int
	partial      int
	chunkFaults  int
	streamedHere bool
	snapshots    int
	resnapshots  int
}

// loadStream is a message being assembled from its stream.
type loadStream struct {
	text strings.Builder
	next int
}

func newLoadSubscriber(base, token, session string, client *http.Client, dropEvery int, sentAt func(string) (time.Time, bool)) *loadSubscriber {
	return &loadSubscriber{base: base, token: token, session: session, client: client, dropEvery: dropEvery,
		sentAt: sentAt, ready: make(chan struct{}), prompts: map[string]int{}, streams: map[string]*loadStream{}}
}

// errLoadPlannedDrop ends a connection the subscriber drops on purpose.
var errLoadPlannedDrop = errors.New("planned drop")

// run streams until ctx ends, reconnecting after every end.
func (s *loadSubscriber) run(ctx stdctx.Context) {
	failures := 0
	for ctx.Err() == nil {
		err := s.stream(ctx)
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		switch {
		case errors.Is(err, errLoadPlannedDrop):
			s.drops++
			failures = 0
		case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			s.ends++
			failures = 0
		default:
			s.failures++
			failures++
			if failures == 20 {
				s.problems = append(s.problems, fmt.Sprintf("gave up after 20 failed connects: %v", err))
				s.mu.Unlock()
				return
			}
		}
		s.mu.Unlock()
		if failures > 0 {
			// A retry backoff, as a browser's EventSource has.
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
}

// stream makes one connection and reads it to its end.
func (s *loadSubscriber) stream(ctx stdctx.Context) error {
	url := s.base + "/v1/sessions/" + s.session + "/stream"
	s.mu.Lock()
	lastID, lastSeq := s.lastID, s.lastSeq
	s.mu.Unlock()
	if s.afterQuery && lastID != "" {
		url += "?after=" + strconv.FormatInt(lastSeq, 10)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	if s.token != "" {
		req.Header.Set("Authorization", "Bearer "+s.token)
	}
	if !s.afterQuery && lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	s.mu.Lock()
	s.connects++
	// What is pending was seen on the old connection: its answer now
	// comes in a backlog, which is no latency figure.
	s.pending = s.pending[:0]
	// A new connection gets a snapshot of the message in flight.
	s.streams = map[string]*loadStream{}
	s.streamedHere = false
	s.mu.Unlock()
	res, err := s.client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("GET stream: %s: %s", res.Status, body)
	}
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		s.problem("stream Content-Type is %q, want text/event-stream", ct)
	}
	r := newLoadSSEReader(res.Body)
	first, err := r.next()
	if err != nil {
		return err
	}
	if first.Event != "ready" {
		s.problem("first message is %q (%s), want ready", first.Event, first.Data)
		return fmt.Errorf("no ready")
	}
	var rd loadReady
	if err := json.Unmarshal(first.Data, &rd); err != nil || rd.LastSeq == nil || rd.Session != s.session {
		s.problem("ready data %s: want {\"session\":%q,\"last_seq\":N} (%v)", first.Data, s.session, err)
	}
	backlogTo := int64(0)
	if rd.LastSeq != nil {
		backlogTo = *rd.LastSeq
	}
	s.readyOnce.Do(func() { close(s.ready) })
	onConn := 0
	for {
		m, err := r.next()
		if err != nil {
			return err
		}
		if s.unchecked {
			var u loadUpdate
			if err := json.Unmarshal(m.Data, &u); err != nil {
				s.problem("%s message with data %q: %v", m.Event, m.Data, err)
			}
		} else {
			s.take(m, backlogTo, time.Now())
		}
		onConn++
		if s.tap != nil {
			s.tap(m)
		}
		if s.dropEvery > 0 && onConn >= s.dropEvery {
			return errLoadPlannedDrop
		}
	}
}

// take checks one message; it reports whether it was a durable event.
func (s *loadSubscriber) take(m loadSSEMessage, backlogTo int64, now time.Time) bool {
	var u loadUpdate
	if err := json.Unmarshal(m.Data, &u); err != nil {
		s.problem("%s message with data %q: %v", m.Event, m.Data, err)
		return false
	}
	if u.Kind != m.Event {
		s.problem("event: %s carries an update of kind %q", m.Event, u.Kind)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Event {
	case "event":
		s.events++
		if u.Event == nil || u.Event.Seq != u.Seq {
			s.problemLocked("event message %s: the update's seq and its event's disagree", m.Data)
		}
		if seq, _, ok := parseLoadID(m.ID); !ok || seq != u.Seq {
			s.problemLocked("event seq %d has id %q, want \"%d-<notice>\"", u.Seq, m.ID, u.Seq)
		}
		switch {
		case u.Seq <= s.lastSeq:
			s.doubles++
			s.problemLocked("seq %d again after %d", u.Seq, s.lastSeq)
			return true
		case u.Seq > s.lastSeq+1:
			s.gaps++
			s.problemLocked("seq %d after %d: %d missing", u.Seq, s.lastSeq, u.Seq-s.lastSeq-1)
		}
		s.lastSeq, s.lastID = u.Seq, m.ID
		live := u.Seq > backlogTo
		if u.Event == nil {
			return true
		}
		switch u.Event.Type {
		case "user/message":
			s.lastUser = u.Seq
			if id := u.Event.RequestID; id != "" {
				s.prompts[id]++
				if sent, ok := s.sentAt(id); ok && live {
					s.userLat = append(s.userLat, now.Sub(sent))
					s.pending = append(s.pending, id)
				}
			}
		case "assistant/message":
			s.lastAnswer = u.Seq
			s.answeredLocked(now)
			if msg := u.Event.Message; msg != nil {
				if st := s.streams[msg.ID]; st != nil {
					// A stream cut short by a re-attach after the message
					// became durable leaves a prefix, which the event
					// completes; a lost or doubled chunk leaves no prefix.
					switch got := st.text.String(); {
					case got == msg.Content:
						s.assembled++
					case strings.HasPrefix(msg.Content, got):
						s.partial++
					default:
						s.problemLocked("message %s: assembled %d bytes from its stream that are no prefix of its assistant/message's %d (%.40q… vs %.40q…)",
							msg.ID, len(got), len(msg.Content), got, msg.Content)
					}
					delete(s.streams, msg.ID)
				}
			}
		}
		return true
	case "notice":
		seq, notice, ok := parseLoadID(m.ID)
		if !ok || u.Notice == nil || notice != u.Notice.ID || seq != s.lastSeq {
			s.problemLocked("notice %s has id %q, want \"%d-<notice id>\"", m.Data, m.ID, s.lastSeq)
		}
		if u.Notice != nil {
			if u.Notice.ID <= s.lastNotice {
				s.problemLocked("notice %d again after %d", u.Notice.ID, s.lastNotice)
			}
			s.lastNotice = u.Notice.ID
		}
		s.lastID = m.ID
	case "drop":
		// The server dropped a client that fell behind: the drop names
		// what the client holds, and the stream ends after it.
		var d struct {
			LastID    string `json:"last_id"`
			LastSeq   int64  `json:"last_seq"`
			Reconnect bool   `json:"reconnect"`
			Code      string `json:"code"`
		}
		if err := json.Unmarshal(m.Data, &d); err != nil || d.LastID != s.lastID || d.LastSeq != s.lastSeq || !d.Reconnect || d.Code != "SERVE_STREAM_BEHIND" {
			s.problemLocked("drop %s: want last_id %q, last_seq %d, reconnect and SERVE_STREAM_BEHIND", m.Data, s.lastID, s.lastSeq)
		}
		s.dropped++
	case "snapshot":
		s.answeredLocked(now)
		if sn := u.Snapshot; sn != nil {
			s.snapshots++
			if s.streamedHere {
				s.resnapshots++
			}
			s.streamedHere = true
			st := &loadStream{next: sn.Next}
			st.text.WriteString(sn.Message.Content)
			s.streams[sn.MessageID] = st
		}
	case "chunk":
		s.answeredLocked(now)
		s.streamedHere = true
		if c := u.Chunk; c != nil {
			st := s.streams[c.MessageID]
			if st == nil {
				st = &loadStream{}
				s.streams[c.MessageID] = st
			}
			if c.Index != st.next {
				s.chunkFaults++
				s.problemLocked("chunk %d of message %s where %d was due", c.Index, c.MessageID, st.next)
			}
			if c.Chunk.Kind == "text" {
				st.text.WriteString(c.Chunk.Text)
			}
			st.next = c.Index + 1
		}
	}
	return false
}

// answeredLocked notes the answer's first sign for the pending prompts.
func (s *loadSubscriber) answeredLocked(now time.Time) {
	for _, id := range s.pending {
		if sent, ok := s.sentAt(id); ok {
			s.answerLat = append(s.answerLat, now.Sub(sent))
		}
	}
	s.pending = s.pending[:0]
}

// parseLoadID splits "<seq>-<notice>" or a bare "<seq>".
func parseLoadID(id string) (seq, notice int64, ok bool) {
	a, b, two := strings.Cut(id, "-")
	seq, err := strconv.ParseInt(a, 10, 64)
	if err != nil {
		return 0, 0, false
	}
	if two {
		if notice, err = strconv.ParseInt(b, 10, 64); err != nil {
			return 0, 0, false
		}
	}
	return seq, notice, true
}

func (s *loadSubscriber) problem(format string, args ...any) {
	s.mu.Lock()
	s.problemLocked(format, args...)
	s.mu.Unlock()
}

func (s *loadSubscriber) problemLocked(format string, args ...any) {
	if len(s.problems) < 20 {
		s.problems = append(s.problems, fmt.Sprintf(format, args...))
	}
}

// settled reports whether the subscriber holds every prompt in want (the
// request ids its session accepted) and an answer after the last of them.
func (s *loadSubscriber) settled(want []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range want {
		if s.prompts[id] == 0 {
			return false
		}
	}
	// A session nobody prompts has nothing to answer.
	return len(want) == 0 || s.lastAnswer > s.lastUser
}

// TestLoadSubscriberCatchesGapsAndDoubles: the checker TestLoad relies on
// flags a skipped seq, a repeated one and an id that does not name its
// event, and counts a prompt seen twice.
func TestLoadSubscriberCatchesGapsAndDoubles(t *testing.T) {
	s := newLoadSubscriber("", "", "s", nil, 0, func(string) (time.Time, bool) { return time.Time{}, false })
	ev := func(seq int64, id, typ, req string) loadSSEMessage {
		data := fmt.Sprintf(`{"kind":"event","seq":%d,"event":{"seq":%d,"type":%q,"request_id":%q}}`, seq, seq, typ, req)
		return loadSSEMessage{Event: "event", ID: id, Data: []byte(data)}
	}
	now := time.Now()
	for _, m := range []loadSSEMessage{
		ev(1, "1-0", "user/message", "a"),
		ev(2, "2-0", "assistant/message", ""),
		ev(2, "2-0", "assistant/message", ""), // doubled
		ev(4, "4-0", "user/message", "a"),     // 3 is missing; a again
		ev(5, "6-0", "turn/end", ""),          // id names another seq
	} {
		s.take(m, 0, now)
	}
	if s.gaps != 1 || s.doubles != 1 {
		t.Errorf("gaps %d, doubles %d; want 1 and 1", s.gaps, s.doubles)
	}
	if s.prompts["a"] != 2 {
		t.Errorf("prompt a counted %d times, want 2", s.prompts["a"])
	}
	if len(s.problems) != 3 {
		t.Errorf("problems %q: want the double, the gap and the id", s.problems)
	}
	if s.settled([]string{"a"}) {
		t.Error("settled with the last user/message unanswered")
	}
}

// TestLoadSSEReaderParsesAsABrowser: comments skipped, one space after the
// colon dropped, data lines joined, CRLF accepted, a cut message dropped.
func TestLoadSSEReaderParsesAsABrowser(t *testing.T) {
	in := ": ping\n\nevent: event\r\nid: 3-1\r\ndata:{\"a\":1}\r\ndata:  x\r\n\r\n\n\nevent: cut\ndata: 1\n"
	r := newLoadSSEReader(strings.NewReader(in))
	m, err := r.next()
	if err != nil || m.Event != "event" || m.ID != "3-1" || string(m.Data) != "{\"a\":1}\n x" {
		t.Fatalf("first message %+v (data %q), %v", m, m.Data, err)
	}
	if m, err := r.next(); err != io.EOF {
		t.Fatalf("after the cut message: %+v, %v; want io.EOF", m, err)
	}
}

// caughtUp reports whether the subscriber holds seq.
func (s *loadSubscriber) caughtUp(seq int64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeq >= seq
}

// frame is m as the server wrote it.
func (m loadSSEMessage) frame() []byte {
	b := append([]byte("event: "), m.Event...)
	if m.ID != "" {
		b = append(append(b, "\nid: "...), m.ID...)
	}
	b = append(append(b, "\ndata: "...), m.Data...)
	return append(b, "\n\n"...)
}

// lastSeqNow is the last durable seq held.
func (s *loadSubscriber) lastSeqNow() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastSeq
}
