package webhook_test

import (
	stdctx "context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/internal/testtools"
	"github.com/dsh-go/dsh/services/session"
)

// A captured delivery replayed under another delivery id, with none, or
// with X-Request-Id runs the agent once: the headers are not signed, so
// the delivery is named by what the signature covers.
func TestAReplayUnderAnotherDeliveryIDRunsOnce(t *testing.T) {
	e := newEnv(t, base(t, "", "")+hooks)
	body := []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c"}}`)
	first := e.signed("push", body, map[string]string{"X-GitHub-Delivery": "d-1"})
	expect(t, first, http.StatusAccepted, "")
	for _, h := range []map[string]string{
		{"X-GitHub-Delivery": "d-2"}, nil, {"X-Request-Id": "forged"}, {"X-GitHub-Delivery": "d-3", "X-Request-Id": "x"},
	} {
		again := e.signed("push", body, h)
		expect(t, again, http.StatusAccepted, "")
		if again.str("message_id") != first.str("message_id") || again.str("request_id") != first.str("request_id") {
			t.Fatalf("the replay with %v was answered %v; the first %v", h, again.body, first.body)
		}
	}
	if !strings.HasPrefix(first.str("request_id"), "webhook:push:sha256-") {
		t.Fatalf("request id %q is not derived from the signed body", first.str("request_id"))
	}
	other := e.signed("push", []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"d"}}`), map[string]string{"X-GitHub-Delivery": "d-1"})
	expect(t, other, http.StatusAccepted, "")
	events := e.turnsEnded("hooks-push", 2)
	if n := len(of(events, session.UserMessage)); n != 2 {
		t.Fatalf("%d prompts delivered for one body replayed four times and another body; want 2", n)
	}
}

// A webhook without session: opens a fresh session per delivery; a
// redelivery after a restart finds that session in the store and runs
// nothing, answering with the first delivery's session and message.
func TestAFreshDeliveryIsNotRunAgainAfterARestart(t *testing.T) {
	yaml := baseIn(t.TempDir(), "", "") + hooks
	body := []byte(`{"action":"opened","number":7}`)
	before := newEnv(t, yaml)
	first := before.signed("fresh", body, map[string]string{"X-GitHub-Delivery": "g-1"})
	expect(t, first, http.StatusAccepted, "")
	id := first.str("session")
	waitUntil(t, "the fresh session closed after its turn", func() bool {
		_, open := before.h.Sessions().Get(id)
		return !open
	})
	before.srv.Close()
	if err := before.hk.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if err := before.h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}

	after := newEnv(t, yaml)
	for _, h := range []map[string]string{{"X-GitHub-Delivery": "g-1"}, {"X-GitHub-Delivery": "g-2"}} {
		again := after.signed("fresh", body, h)
		expect(t, again, http.StatusAccepted, "")
		if again.str("session") != id || again.str("message_id") != first.str("message_id") {
			t.Fatalf("after a restart the redelivery %v was answered %v; the first %v", h, again.body, first.body)
		}
	}
	waitUntil(t, "the session closed again", func() bool {
		_, open := after.h.Sessions().Get(id)
		return !open
	})
	var fresh []session.Summary
	for _, s := range after.persisted() {
		if strings.HasPrefix(s.ID, "webhook-fresh-") || s.ID == id {
			fresh = append(fresh, s)
		}
	}
	if len(fresh) != 1 || fresh[0].Turns != 1 {
		t.Fatalf("stored sessions of the delivery %+v; want one, with one turn", fresh)
	}
}

// A delivery queued in the webhook's session when a person cancels its
// turn is recorded as dropped; its redelivery is told so and runs nothing.
func TestARedeliveryOfADroppedDeliveryIsToldSo(t *testing.T) {
	e := newEnv(t, base(t, `[{tool_calls: [{name: block, arguments: "{}"}]}, {text: done}]`, "")+hooks)
	first := []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"one"}}`)
	second := []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"two"}}`)
	expect(t, e.signed("push", first, nil), http.StatusAccepted, "")
	select {
	case <-testtools.BlockStarted():
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	queued := e.signed("push", second, nil)
	expect(t, queued, http.StatusAccepted, "")
	s, _ := e.h.Sessions().Get("hooks-push")
	if err := s.Cancel(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	testtools.ReleaseBlock()
	again := e.signed("push", second, nil)
	expect(t, again, http.StatusConflict, "AGENT_MESSAGE_DROPPED")
	if out, _ := again.body["outcome"].(map[string]any); out["message_id"] != queued.str("message_id") || out["dropped"] != "cancelled" {
		t.Fatalf("the redelivery of a dropped delivery was answered %v", again.body)
	}
	if n := len(of(e.events("hooks-push"), session.UserMessage)); n != 1 {
		t.Fatalf("%d prompts delivered; want only the first", n)
	}
}

// A delivery dropped from its session, which was then closed, is told so
// on a redelivery too: the handler's memory of the first answer (202) is
// checked against the session's stored log, not only against a session
// open here.
func TestARedeliveryOfADroppedDeliveryIsToldSoAfterItsSessionClosed(t *testing.T) {
	e := newEnv(t, base(t, `[{tool_calls: [{name: block, arguments: "{}"}]}, {text: done}]`, "")+hooks)
	first := []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"one"}}`)
	second := []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"two"}}`)
	expect(t, e.signed("push", first, nil), http.StatusAccepted, "")
	select {
	case <-testtools.BlockStarted():
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	queued := e.signed("push", second, nil)
	expect(t, queued, http.StatusAccepted, "")
	s, _ := e.h.Sessions().Get("hooks-push")
	if err := s.Cancel(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	testtools.ReleaseBlock()
	if err := e.h.Sessions().Close(stdctx.Background(), "hooks-push"); err != nil {
		t.Fatal(err)
	}
	again := e.signed("push", second, nil)
	expect(t, again, http.StatusConflict, "AGENT_MESSAGE_DROPPED")
	if out, _ := again.body["outcome"].(map[string]any); out["message_id"] != queued.str("message_id") || out["dropped"] != "cancelled" {
		t.Fatalf("the redelivery of a dropped delivery was answered %v", again.body)
	}
}
