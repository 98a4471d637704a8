package serve_test

import (
	stdctx "context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/plugin"
	"github.com/dsh-go/dsh/plugins/llm/scripted"
	"github.com/dsh-go/dsh/services/agentcontroller"
)

// holdRefuse is the state of servetest.hold-refuse: it holds every message
// saying "hold" until the test releases it, then refuses it.
var holdRefuse = struct {
	mu      sync.Mutex
	held    chan struct{}
	release chan struct{}
}{}

func resetHoldRefuse() {
	holdRefuse.mu.Lock()
	holdRefuse.held, holdRefuse.release = make(chan struct{}, 4), make(chan struct{})
	holdRefuse.mu.Unlock()
}

func init() {
	plugin.Register("servetest.hold-refuse", "holds messages saying hold, then refuses them (tests only)", func(ctx *dshctx.Context, _ noConfig) error {
		_, err := agentcontroller.EventAdmission.On(ctx, func(ctx stdctx.Context, a agentcontroller.Admission, next agentcontroller.AdmissionNext) (agentcontroller.Decision, error) {
			if !strings.Contains(a.Message.Content, "hold") {
				return next.Call(ctx, a)
			}
			holdRefuse.mu.Lock()
			held, release := holdRefuse.held, holdRefuse.release
			holdRefuse.mu.Unlock()
			held <- struct{}{}
			select {
			case <-release:
				return agentcontroller.Reject("servetest/refused", "held, then refused by the test", false), nil
			case <-ctx.Done():
				return agentcontroller.Decision{}, ctx.Err()
			}
		})
		return err
	})
}

// errorOut is a refusal's body with its outcome.
type errorOut struct {
	Code      string `json:"code"`
	Reason    string `json:"reason"`
	RequestID string `json:"request_id"`
	Outcome   *struct {
		Outcome  string `json:"outcome"`
		Seq      int64  `json:"seq"`
		Recorded bool   `json:"recorded"`
	} `json:"outcome"`
}

// eventsOfType returns the events of one type.
func eventsOfType(evs []eventOut, typ string) []eventOut {
	var out []eventOut
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// A message admission held and then refused ends in one message/refused
// event, carried by the live stream; the refusal names its outcome, and a
// retry of its request id is answered with that recorded refusal — not
// held and decided a second time.
func TestAHeldThenRefusedMessageIsRecordedAndItsRetryAnswered(t *testing.T) {
	resetHoldRefuse()
	e := newEnv(t, envOpts{extra: "  - use: servetest.hold-refuse\n"})
	id := e.open(nil)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	s := e.stream(ctx, id, nil)
	defer s.close()

	answered := make(chan response, 1)
	go func() {
		answered <- e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "h1", "content": "hold me"})
	}()
	select {
	case <-holdRefuse.held:
	case <-time.After(patience):
		t.Fatal("admission did not hold the message")
	}
	close(holdRefuse.release)
	r := <-answered
	var first errorOut
	r.json(t, &first)
	if r.status != http.StatusUnprocessableEntity || first.Reason != "servetest/refused" || first.Outcome == nil || first.Outcome.Outcome != "refused" {
		t.Fatalf("the held message answered %d %s", r.status, r.body)
	}

	evs := e.waitEvents(id, "the refusal in the log", func(evs []eventOut) bool { return len(eventsOfType(evs, "message/refused")) == 1 })
	ref := eventsOfType(evs, "message/refused")[0]
	if ref.RequestID != "h1" || ref.Reason != "servetest/refused" || ref.Message == nil || ref.Message.Content != "hold me" {
		t.Fatalf("recorded %+v", ref)
	}
	if len(eventsOfType(evs, "user/message")) != 0 {
		t.Fatal("the refused message reached a turn")
	}
	waitStreamed(t, s, `"message/refused"`)

	// The retry is not held (the plugin would block it and report it).
	r = e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "h1", "content": "hold me"})
	var retry errorOut
	r.json(t, &retry)
	if r.status != http.StatusUnprocessableEntity || retry.Code != "SESSION_PROMPT_REJECTED" || retry.Reason != "servetest/refused" ||
		retry.Outcome == nil || retry.Outcome.Outcome != "refused" || !retry.Outcome.Recorded || retry.Outcome.Seq != ref.Seq {
		t.Fatalf("the retry answered %d %s", r.status, r.body)
	}
	select {
	case <-holdRefuse.held:
		t.Fatal("the retry was held and decided again")
	default:
	}
	if n := len(eventsOfType(e.events(id), "message/refused")); n != 1 {
		t.Fatalf("%d refusals recorded for one request id", n)
	}
}

// A message that waits for the ready gate until its timeout expires: the
// outcome is "expired", recorded as message/expired, and the retry says
// so again.
func TestAnExpiredMessageIsRecordedAndItsRetryAnswered(t *testing.T) {
	e := newEnv(t, envOpts{extra: "  - use: admission.ready-gate\n    config: {timeout: 30ms}\n"})
	id := e.open(nil)
	r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "x1", "content": "wait for me"})
	var first errorOut
	r.json(t, &first)
	if r.status != http.StatusUnprocessableEntity || first.Reason != "admission/not-ready" || first.Outcome == nil || first.Outcome.Outcome != "expired" {
		t.Fatalf("the waiting message answered %d %s", r.status, r.body)
	}
	evs := e.waitEvents(id, "the expiry in the log", func(evs []eventOut) bool { return len(eventsOfType(evs, "message/expired")) == 1 })
	exp := eventsOfType(evs, "message/expired")[0]
	if exp.RequestID != "x1" || exp.Reason != "admission/not-ready" {
		t.Fatalf("recorded %+v", exp)
	}
	start := time.Now()
	r = e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "x1", "content": "wait for me"})
	var retry errorOut
	r.json(t, &retry)
	if r.status != http.StatusUnprocessableEntity || retry.Outcome == nil || retry.Outcome.Outcome != "expired" || !retry.Outcome.Recorded || retry.Outcome.Seq != exp.Seq {
		t.Fatalf("the retry answered %d %s", r.status, r.body)
	}
	if time.Since(start) >= 30*time.Millisecond {
		t.Fatalf("the retry waited %s: it was held again", time.Since(start))
	}
}

// acceptedOut is a 202 with where a retried message went.
type acceptedOut struct {
	MessageID string `json:"message_id"`
	Delivered *struct {
		Outcome string `json:"outcome"`
		Type    string `json:"type"`
		Turn    int    `json:"turn"`
	} `json:"delivered"`
}

// Each accepted message's outcome tells a message that started turn N
// (delivered) from one that joined it (merged): a steer into the running
// turn, and a follow-up queued together with the one that starts the next.
func TestARetrySaysDeliveredOrMerged(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "after"}, {Text: "second"}}})
	id := e.open(nil)
	e.send(id, "m1", "run the gate")
	select {
	case <-gate.started:
	case <-time.After(patience):
		t.Fatal("the tool did not start")
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "m2", "content": "steer in", "mode": "steer"}); r.status != http.StatusAccepted {
		t.Fatalf("steer: %d %s", r.status, r.body)
	}
	e.send(id, "m3", "next one")
	e.send(id, "m4", "and this too")
	openGate()
	e.waitEvents(id, "two turns", turnsEnded(2))
	want := map[string]struct {
		content, outcome string
		turn             int
	}{"m1": {"run the gate", "delivered", 1}, "m2": {"steer in", "merged", 1}, "m3": {"next one", "delivered", 2}, "m4": {"and this too", "merged", 2}}
	for rid, w := range want {
		// A retry is the same message: the same text under the same id.
		r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": rid, "content": w.content})
		var a acceptedOut
		r.json(t, &a)
		if r.status != http.StatusAccepted || a.Delivered == nil || a.Delivered.Outcome != w.outcome || a.Delivered.Turn != w.turn {
			t.Fatalf("retry of %s: %d %s; want %s in turn %d", rid, r.status, r.body, w.outcome, w.turn)
		}
	}
}

// waitStreamed waits until the live stream carries data containing what.
func waitStreamed(t *testing.T, s *eventStream, what string) {
	t.Helper()
	deadline := time.After(patience)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				t.Fatal("the stream ended")
			}
			if strings.Contains(string(m.data), what) {
				return
			}
		case <-deadline:
			t.Fatalf("the stream never carried %s", what)
		}
	}
}

// A message refused while a turn runs is answered on a retry from the
// controller's memory until the turn ends and its driver writes the
// refusal; the record then outlives the session: closed and resumed, a
// retry still gets the same refusal, placed in the log.
func TestARefusalDuringATurnIsRecordedAtOnceAndOutlivesAResume(t *testing.T) {
	resetHoldRefuse()
	close(holdRefuse.release)
	e := newEnv(t, envOpts{extra: "  - use: servetest.hold-refuse\n", replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "after"}}})
	id := e.open(nil)
	e.send(id, "t1", "run the gate")
	select {
	case <-gate.started:
	case <-time.After(patience):
		t.Fatal("the tool did not start")
	}
	post := func() errorOut {
		t.Helper()
		r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "t2", "content": "hold this"})
		var out errorOut
		r.json(t, &out)
		if r.status != http.StatusUnprocessableEntity || out.Reason != "servetest/refused" || out.Outcome == nil || out.Outcome.Outcome != "refused" {
			t.Fatalf("answered %d %s", r.status, r.body)
		}
		return out
	}
	post()
	// Durable before its sender heard, though the turn still runs.
	if retry := post(); !retry.Outcome.Recorded || retry.Outcome.Seq == 0 {
		t.Fatalf("the retry during the turn: %+v", *retry.Outcome)
	}
	if len(holdRefuse.held) != 1 {
		t.Fatalf("admission decided the request %d times", len(holdRefuse.held))
	}
	openGate()
	evs := e.waitEvents(id, "the refusal after the turn", func(evs []eventOut) bool { return len(eventsOfType(evs, "message/refused")) == 1 })
	ref := eventsOfType(evs, "message/refused")[0]
	if ref.Turn != 1 || ref.RequestID != "t2" {
		t.Fatalf("recorded %+v", ref)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != http.StatusOK {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/resume", nil); r.status != http.StatusOK {
		t.Fatalf("resume: %d %s", r.status, r.body)
	}
	if retry := post(); !retry.Outcome.Recorded || retry.Outcome.Seq != ref.Seq {
		t.Fatalf("the retry after a resume: %+v; want seq %d", *retry.Outcome, ref.Seq)
	}
	if len(holdRefuse.held) != 1 {
		t.Fatalf("admission decided the request %d times", len(holdRefuse.held))
	}
}
