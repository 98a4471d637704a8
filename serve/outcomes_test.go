package serve_test

import (
	stdctx "context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/plugins/llm/scripted"
)

// droppedOut is a message/dropped event as the API sends it.
type droppedOut struct {
	Type      string `json:"type"`
	Turn      int    `json:"turn"`
	Reason    string `json:"reason"`
	By        string `json:"by"`
	RequestID string `json:"request_id"`
	Message   struct {
		ID      string `json:"id"`
		Content string `json:"content"`
	} `json:"message"`
}

// A follow-up and a steer accepted (202) while a turn runs are not lost
// when a client cancels that turn: each is recorded as message/dropped,
// with who cancelled, in the log and on the live stream, and a retry of
// its request id answers with that outcome instead of a fresh 202.
func TestCancelRecordsTheMessagesItDrops(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "after"}, {Text: "fresh"}}})
	id := e.open(nil)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	s := e.stream(ctx, id, nil)
	defer s.close()

	e.send(id, "r1", "run the gate")
	select {
	case <-gate.started:
	case <-time.After(patience):
		t.Fatal("the tool did not start")
	}
	queued := e.send(id, "r2", "queued behind the turn")
	r := e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "r3", "content": "steer it", "mode": "steer"})
	if r.status != http.StatusAccepted {
		t.Fatalf("steer: %d %s", r.status, r.body)
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/cancel", nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}

	// The log holds one dropped event per message, and no user/message.
	evs := e.waitEvents(id, "two dropped messages", func(evs []eventOut) bool {
		n := 0
		for _, ev := range evs {
			if ev.Type == "message/dropped" {
				n++
			}
		}
		return n == 2
	})
	for _, ev := range evs {
		if ev.Type == "user/message" && ev.RequestID != "r1" {
			t.Fatalf("a dropped message was delivered: %+v", ev)
		}
	}
	var page struct{ Events []droppedOut }
	e.call("GET", "/v1/sessions/"+id+"/events", nil).json(t, &page)
	drops := map[string]droppedOut{}
	for _, ev := range page.Events {
		if ev.Type == "message/dropped" {
			drops[ev.RequestID] = ev
		}
	}
	if d := drops["r2"]; d.Message.ID != queued || d.Message.Content != "queued behind the turn" || d.Reason != "cancelled" ||
		!strings.Contains(d.By, "HTTP client") || d.Turn != 1 {
		t.Fatalf("r2 dropped as %+v", d)
	}
	if d := drops["r3"]; d.Message.Content != "steer it" || d.Reason != "cancelled" {
		t.Fatalf("r3 dropped as %+v", d)
	}

	// The stream carried them as durable events.
	seen := 0
	deadline := time.After(patience)
	for seen < 2 {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				t.Fatal("the stream ended")
			}
			if strings.Contains(string(m.data), `"message/dropped"`) {
				seen++
			}
		case <-deadline:
			t.Fatalf("the stream carried %d message/dropped events; want 2", seen)
		}
	}

	// A retry is told what happened, under the same request id.
	r = e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "r2", "content": "queued behind the turn"})
	var body struct {
		Code      string         `json:"code"`
		RequestID string         `json:"request_id"`
		Outcome   map[string]any `json:"outcome"`
	}
	r.json(t, &body)
	if r.status != http.StatusConflict || body.Code != "AGENT_MESSAGE_DROPPED" || body.RequestID != "r2" ||
		body.Outcome["message_id"] != queued || body.Outcome["dropped"] != "cancelled" {
		t.Fatalf("retry of a dropped message: %d %s", r.status, r.body)
	}
	// Nothing ran for it; a new request id delivers.
	e.send(id, "r4", "now")
	evs = e.waitEvents(id, "the next turn", turnsEnded(2))
	// A retry of a delivered message says where it went.
	r = e.call("POST", "/v1/sessions/"+id+"/messages", map[string]string{"request_id": "r4", "content": "now"})
	var acc struct {
		MessageID string `json:"message_id"`
		Delivered *struct {
			Type string `json:"type"`
			Turn int    `json:"turn"`
		} `json:"delivered"`
	}
	r.json(t, &acc)
	if r.status != http.StatusAccepted || acc.Delivered == nil || acc.Delivered.Type != "user/message" || acc.Delivered.Turn != 2 {
		t.Fatalf("retry of a delivered message: %d %s", r.status, r.body)
	}
	if got := answer(evs); got != "after" {
		t.Fatalf("the next turn answered %q", got)
	}
	b, _ := json.Marshal(evs)
	if strings.Count(string(b), `"user/message"`) != 2 {
		t.Fatalf("user messages in %s", b)
	}
}

// The text a cancelled answer had streamed stays in the log, marked cut,
// and the next turn's model request sees it.
func TestACancelledAnswerStays(t *testing.T) {
	e := newEnv(t, envOpts{delay: 20 * time.Millisecond, replies: []scripted.Reply{
		{Text: "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty"},
		{Text: "next"},
	}})
	id := e.open(nil)
	ctx, cancel := stdctx.WithCancel(stdctx.Background())
	defer cancel()
	s := e.stream(ctx, id, nil)
	defer s.close()
	e.send(id, "r1", "count")
	// Wait until a few words streamed, then cancel.
	chunks := 0
	for chunks < 3 {
		select {
		case m := <-s.msgs:
			if m.event == "chunk" {
				chunks++
			}
		case <-time.After(patience):
			t.Fatal("nothing streamed")
		}
	}
	if r := e.call("POST", "/v1/sessions/"+id+"/cancel", nil); r.status != 200 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var page struct {
		Events []struct {
			Type    string `json:"type"`
			Finish  string `json:"finish"`
			Reason  string `json:"reason"`
			Message *struct {
				Content string `json:"content"`
			} `json:"message"`
		}
	}
	e.waitEvents(id, "the turn end", turnsEnded(1))
	e.call("GET", "/v1/sessions/"+id+"/events", nil).json(t, &page)
	var cut string
	for _, ev := range page.Events {
		if ev.Type == "assistant/message" && ev.Finish == "cut" {
			cut = ev.Message.Content
		}
		if ev.Type == "turn/end" && ev.Reason != "aborted" {
			t.Fatalf("the turn ended %q", ev.Reason)
		}
	}
	if !strings.HasPrefix(cut, "one two three") || strings.Contains(cut, "twenty") {
		t.Fatalf("the cut answer in the log is %q", cut)
	}
}

// Closing a session with a message queued records the message as dropped
// because the session closed, in the stored log.
func TestCloseRecordsTheQueuedMessages(t *testing.T) {
	e := newEnv(t, envOpts{replies: []scripted.Reply{{ToolCalls: []scripted.Call{{Name: "gate"}}}, {Text: "after"}}})
	id := e.open(nil)
	e.send(id, "r1", "run the gate")
	select {
	case <-gate.started:
	case <-time.After(patience):
		t.Fatal("the tool did not start")
	}
	queued := e.send(id, "r2", "queued behind the turn")
	if r := e.call("POST", "/v1/sessions/"+id+"/close", nil); r.status != 200 {
		t.Fatalf("close: %d %s", r.status, r.body)
	}
	var page struct{ Events []droppedOut }
	e.call("GET", "/v1/sessions/"+id+"/events", nil).json(t, &page)
	var drops []droppedOut
	for _, ev := range page.Events {
		if ev.Type == "message/dropped" {
			drops = append(drops, ev)
		}
	}
	if len(drops) != 1 || drops[0].Message.ID != queued || drops[0].Reason != "closed" || drops[0].RequestID != "r2" {
		t.Fatalf("stored drops %+v", drops)
	}
}
