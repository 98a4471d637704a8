package webhook_test

import (
	stdctx "context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/internal/testtools"
	"github.com/dsh-go/dsh/serve/webhook"
	"github.com/dsh-go/dsh/services/session"
)

// hooks is a serve: key with a webhook per behaviour under test.
const hooks = `serve:
  webhooks:
    push:
      secret_env: PUSH_SECRET
      session: hooks-push
      prompt: "{{.Name}} {{.Header.Get \"X-GitHub-Event\"}}: {{with .Body}}{{.repository.full_name}} by {{index . \"pusher\" \"name\"}}{{else}}raw={{$.Raw}}{{end}}"
    fresh:
      secret_env: FRESH_SECRET
      prompt: "fresh {{.Raw}}"
    small:
      secret_env: SMALL_SECRET
      max_body_bytes: 64
      signature_header: X-Signature
      prompt: "small {{.Raw}}"
    headers:
      secret_env: HEADERS_SECRET
      session: hooks-headers
      prompt: "sig=[{{.Header.Get \"X-Hub-Signature-256\"}}] auth=[{{.Header.Get \"Authorization\"}}] ua=[{{.Header.Get \"X-Test\"}}]"
    strict:
      secret_env: STRICT_SECRET
      session: hooks-strict
      prompt: "{{.Body.repository.name}}{{if eq .Raw \"{}\"}}{{end}}"
`

func TestNewNamesTheWebhookWhoseSecretIsMissing(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(base(t, "", "")+hooks), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = webhook.New(webhook.Options{Sessions: nil, Config: cfg})
	if err == nil {
		t.Fatal("New accepted no session controller")
	}
	e := newEnv(t, base(t, "", "")+hooks)
	_, err = webhook.New(webhook.Options{Sessions: e.h.Sessions(), Config: cfg, Getenv: func(k string) string {
		if k == "SMALL_SECRET" {
			return ""
		}
		return "x"
	}})
	if err == nil || !strings.Contains(err.Error(), `webhook "small"`) || !strings.Contains(err.Error(), "SMALL_SECRET") {
		t.Fatalf("New with an empty secret: %v; want an error naming the webhook and its variable", err)
	}
}

func TestOnlyASignedDeliveryIsDelivered(t *testing.T) {
	e := newEnv(t, base(t, "", "")+hooks)
	body := []byte(`{"repository":{"full_name":"dsh-go/dsh"},"pusher":{"name":"ana"}}`)
	for _, tc := range []struct {
		name, signature, reason string
	}{
		{"missing", "", webhook.ReasonMissingSignature},
		{"other secret", sign("not-the-secret", body), webhook.ReasonBadSignature},
		{"not hex", "sha256=zz", webhook.ReasonBadSignature},
		{"other scheme", strings.Replace(sign(secret, body), "sha256=", "sha1=", 1), webhook.ReasonBadSignature},
		{"other body", sign(secret, append(body, ' ')), webhook.ReasonBadSignature},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := e.post("push", body, map[string]string{"X-Hub-Signature-256": tc.signature})
			expect(t, r, http.StatusUnauthorized, string(webhook.BadSignature))
			if r.str("reason") != tc.reason {
				t.Fatalf("reason %q; want %q", r.str("reason"), tc.reason)
			}
			if strings.Contains(r.str("message"), secret) || (tc.signature != "" && strings.Contains(r.str("message"), tc.signature)) {
				t.Fatalf("the answer shows the secret or the signature: %v", r.body)
			}
		})
	}
	if _, open := e.h.Sessions().Get("hooks-push"); open || len(e.persisted()) != 0 {
		t.Fatal("a refused delivery opened a session")
	}
	r := e.signed("push", body, map[string]string{"X-GitHub-Event": "push"})
	expect(t, r, http.StatusAccepted, "")
	if r.str("session") != "hooks-push" || r.str("message_id") == "" || !strings.HasPrefix(r.str("request_id"), "webhook:push:") {
		t.Fatalf("accepted with %v", r.body)
	}
}

func TestTheTemplateSeesTheDelivery(t *testing.T) {
	e := newEnv(t, base(t, "", "")+hooks)
	body := []byte(`{"repository":{"full_name":"dsh-go/dsh"},"pusher":{"name":"ana"}}`)
	expect(t, e.signed("push", body, map[string]string{"X-GitHub-Event": "push"}), http.StatusAccepted, "")
	expect(t, e.signed("push", []byte("plain text"), map[string]string{"X-GitHub-Event": "ping"}), http.StatusAccepted, "")
	events := e.turnsEnded("hooks-push", 2)
	var prompts []string
	for _, ev := range of(events, session.UserMessage) {
		prompts = append(prompts, ev.Message.Content)
	}
	want := []string{"push push: dsh-go/dsh by ana", "push ping: raw=plain text"}
	if strings.Join(prompts, "|") != strings.Join(want, "|") {
		t.Fatalf("prompts %q; want %q", prompts, want)
	}
}

func TestTheTemplateDoesNotSeeTheSignatureOrCredentials(t *testing.T) {
	e := newEnv(t, base(t, "", "")+hooks)
	expect(t, e.signed("headers", []byte(`{}`), map[string]string{"Authorization": "Bearer x", "X-Test": "kept"}), http.StatusAccepted, "")
	events := e.turnsEnded("hooks-headers", 1)
	if got := of(events, session.UserMessage)[0].Message.Content; got != "sig=[] auth=[] ua=[kept]" {
		t.Fatalf("prompt %q; want the signature and credentials left out", got)
	}
}

func TestConcurrentDeliveriesShareTheFixedSession(t *testing.T) {
	e := newEnv(t, base(t, "", "")+hooks)
	const n = 8
	answers := make(chan response, 2*n)
	var wg sync.WaitGroup
	for i := range 2 * n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Each body twice: 2n requests, n deliveries.
			body := []byte(fmt.Sprintf(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c-%d"}}`, i%n))
			answers <- e.signed("push", body, map[string]string{"X-GitHub-Delivery": fmt.Sprint("c-", i)})
		}()
	}
	wg.Wait()
	close(answers)
	ids := map[string]string{}
	for r := range answers {
		if r.status != http.StatusAccepted || r.str("session") != "hooks-push" {
			t.Fatalf("answered %d %v", r.status, r.body)
		}
		if first, ok := ids[r.str("request_id")]; ok && first != r.str("message_id") {
			t.Fatalf("request %s got message ids %s and %s", r.str("request_id"), first, r.str("message_id"))
		}
		ids[r.str("request_id")] = r.str("message_id")
	}
	if len(ids) != n {
		t.Fatalf("%d distinct deliveries; want %d", len(ids), n)
	}
	waitUntil(t, "every delivery ran", func() bool {
		in, err := e.h.Sessions().Info(stdctx.Background(), "hooks-push")
		if err != nil {
			t.Fatal(err)
		}
		return !in.Running && in.Pending == 0 && len(of(e.events("hooks-push"), session.UserMessage)) >= n
	})
	if got := len(of(e.events("hooks-push"), session.UserMessage)); got != n {
		t.Fatalf("%d prompts; want %d", got, n)
	}
}

func TestATemplateFailureDeliversNothing(t *testing.T) {
	e := newEnv(t, base(t, "", "")+hooks)
	r := e.signed("strict", []byte(`[1, 2]`), nil)
	expect(t, r, http.StatusUnprocessableEntity, string(webhook.TemplateFailed))
	if !strings.Contains(r.str("message"), "repository") {
		t.Fatalf("the answer does not say what failed: %v", r.body)
	}
	r = e.signed("strict", []byte(`{}`), nil)
	expect(t, r, http.StatusUnprocessableEntity, string(webhook.TemplateFailed))
	if _, open := e.h.Sessions().Get("hooks-strict"); open || len(e.persisted()) != 0 {
		t.Fatal("a delivery whose template failed opened a session")
	}
	// The failure was not remembered as a delivery: once fixed, it goes.
	expect(t, e.signed("strict", []byte(`{"repository":{"name":"dsh"}}`), nil), http.StatusAccepted, "")
}

func TestUnknownHookMethodAndSize(t *testing.T) {
	e := newEnv(t, base(t, "", "")+hooks)
	expect(t, e.signed("nope", []byte(`{}`), nil), http.StatusNotFound, string(webhook.NotFound))
	r := e.do(http.MethodGet, "push", nil, nil)
	expect(t, r, http.StatusMethodNotAllowed, string(webhook.MethodNotAllowed))
	if r.header.Get("Allow") != http.MethodPost {
		t.Fatalf("Allow: %q", r.header.Get("Allow"))
	}
	big := []byte(strings.Repeat("x", 65))
	expect(t, e.post("small", big, map[string]string{"X-Signature": sign(secret, big)}), http.StatusRequestEntityTooLarge, string(webhook.BodyTooLarge))
	// Without a Content-Length the limit holds while reading.
	expect(t, e.do(http.MethodPost, "small", struct{ *strings.Reader }{strings.NewReader(string(big))}, map[string]string{"X-Signature": sign(secret, big)}),
		http.StatusRequestEntityTooLarge, string(webhook.BodyTooLarge))
	fits := big[:64]
	r = e.post("small", fits, map[string]string{"X-Signature": sign(secret, fits)})
	expect(t, r, http.StatusAccepted, "")
}

func TestARedeliveryIsDeliveredOnce(t *testing.T) {
	e := newEnv(t, base(t, "", "")+hooks)
	body := []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c"}}`)
	first := e.signed("push", body, map[string]string{"X-GitHub-Delivery": "d-1"})
	expect(t, first, http.StatusAccepted, "")
	again := e.signed("push", body, map[string]string{"X-GitHub-Delivery": "d-1"})
	expect(t, again, http.StatusAccepted, "")
	if again.str("message_id") != first.str("message_id") || again.str("request_id") != first.str("request_id") {
		t.Fatalf("the redelivery was answered %v; the first %v", again.body, first.body)
	}
	other := e.signed("push", []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"d"}}`), map[string]string{"X-GitHub-Delivery": "d-2"})
	expect(t, other, http.StatusAccepted, "")
	events := e.turnsEnded("hooks-push", 2)
	if n := len(of(events, session.UserMessage)); n != 2 {
		t.Fatalf("%d prompts delivered for deliveries d-1, d-1 again and d-2; want 2", n)
	}
	// Without a delivery id the body names the delivery: the fresh
	// session opened for it is not opened twice.
	a := e.signed("fresh", []byte("same"), nil)
	b := e.signed("fresh", []byte("same"), nil)
	expect(t, a, http.StatusAccepted, "")
	if b.str("session") != a.str("session") || b.str("message_id") != a.str("message_id") {
		t.Fatalf("the same unnamed delivery twice went to %v and %v", a.body, b.body)
	}
}

func TestAFixedSessionIsReusedAndAFreshOneClosed(t *testing.T) {
	e := newEnv(t, base(t, "", "")+hooks)
	body := []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c"}}`)
	one := e.signed("push", body, map[string]string{"X-GitHub-Delivery": "1"})
	e.turnsEnded("hooks-push", 1)
	two := e.signed("push", []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"d"}}`), map[string]string{"X-GitHub-Delivery": "2"})
	e.turnsEnded("hooks-push", 2)
	if one.str("session") != "hooks-push" || two.str("session") != "hooks-push" {
		t.Fatalf("deliveries went to %q and %q; want hooks-push", one.str("session"), two.str("session"))
	}
	f := e.signed("fresh", []byte("x"), nil)
	expect(t, f, http.StatusAccepted, "")
	id := f.str("session")
	waitUntil(t, "the fresh session closed after its turn", func() bool {
		_, open := e.h.Sessions().Get(id)
		return !open
	})
	for _, s := range e.persisted() {
		if s.ID == id {
			if s.Turns != 1 {
				t.Fatalf("the fresh session has %d turns; want 1", s.Turns)
			}
			return
		}
	}
	t.Fatalf("the fresh session %q was not persisted: %v", id, e.persisted())
}

func TestARefusingAdmissionPluginRefusesTheDelivery(t *testing.T) {
	// The ready gate refuses an unattended message to an agent nobody
	// reported ready, at once: it never holds one for a person.
	e := newEnv(t, base(t, "", "  - use: admission.ready-gate\n")+hooks)
	for _, name := range []string{"push", "fresh"} {
		r := e.signed(name, []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c"}}`), nil)
		expect(t, r, http.StatusUnprocessableEntity, "SESSION_PROMPT_REJECTED")
		if r.str("reason") != "admission/not-ready" || r.body["presented"] != false || !strings.HasPrefix(r.str("request_id"), "webhook:"+name+":") || r.str("message") == "" {
			t.Fatalf("%s refused with %v", name, r.body)
		}
	}
	if n := len(of(e.events("hooks-push"), session.UserMessage)); n != 0 {
		t.Fatalf("the refused delivery reached the session: %d prompts", n)
	}
	for _, s := range e.h.Sessions().Sessions() {
		if s.ID() != "hooks-push" {
			t.Fatalf("the fresh session %q of a refused delivery is still open", s.ID())
		}
	}
	// The refusal is the delivery's recorded outcome: a redelivery (the
	// sender's retry, the same signed delivery) is answered with it and
	// decided no second time — also for the delivery's own session, which
	// keeps the refusal as its record.
	for _, name := range []string{"push", "fresh"} {
		r := e.signed(name, []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c"}}`), nil)
		expect(t, r, http.StatusUnprocessableEntity, "SESSION_PROMPT_REJECTED")
		o, _ := r.body["outcome"].(map[string]any)
		if r.str("reason") != "admission/not-ready" || o["outcome"] != "refused" || o["recorded"] != true {
			t.Fatalf("%s redelivered: %v", name, r.body)
		}
	}
	waitUntil(t, "the refusal in the log", func() bool { return len(of(e.events("hooks-push"), session.MessageRefused)) == 1 })
	for _, s := range e.persisted() {
		if s.ID != "hooks-push" && s.Turns != 0 {
			t.Fatalf("the fresh session %q of a refused delivery ran %d turns", s.ID, s.Turns)
		}
	}
}

func TestAToolNeedingApprovalIsRefusedInAWebhookTurn(t *testing.T) {
	testtools.Risky.Store(0)
	e := newEnv(t, base(t, `[{tool_calls: [{name: risky, arguments: "{}"}]}, {text: done}]`, "")+hooks)
	expect(t, e.signed("push", []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c"}}`), nil), http.StatusAccepted, "")
	events := e.turnsEnded("hooks-push", 1)
	results := of(events, session.ToolResult)
	if len(results) != 1 || !strings.Contains(results[0].Message.Content, "unattended source") {
		t.Fatalf("tool results %v; want the call refused as unattended", results)
	}
	if testtools.Risky.Load() != 0 {
		t.Fatal("the tool that needs approval ran")
	}
	if end := of(events, session.TurnEnd); end[0].Reason != "completed" {
		t.Fatalf("the turn ended %q; want completed (it carries on without the tool)", end[0].Reason)
	}
}

func TestCloseCancelsTurnsStillRunningAtItsDeadline(t *testing.T) {
	e := newEnv(t, base(t, `[{tool_calls: [{name: block, arguments: "{}"}]}, {text: done}]`, "")+hooks)
	r := e.signed("fresh", []byte("go"), nil)
	expect(t, r, http.StatusAccepted, "")
	select {
	case <-testtools.BlockStarted():
	case <-time.After(wait):
		t.Fatal("the tool did not start")
	}
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), 50*time.Millisecond)
	defer cancel()
	if err := e.hk.Close(ctx); err == nil {
		t.Fatal("Close returned nil though a turn ran past its deadline")
	}
	if _, open := e.h.Sessions().Get(r.str("session")); open {
		t.Fatal("the delivery's session is still open after Close")
	}
	expect(t, e.signed("fresh", []byte("late"), nil), http.StatusServiceUnavailable, "")
}

func TestARedeliveryAfterARestartIsNotDeliveredAgain(t *testing.T) {
	yaml := baseIn(t.TempDir(), "", "") + hooks
	body := []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"c"}}`)
	before := newEnv(t, yaml)
	first := before.signed("push", body, map[string]string{"X-GitHub-Delivery": "r-1"})
	expect(t, first, http.StatusAccepted, "")
	before.turnsEnded("hooks-push", 1)
	before.srv.Close()
	if err := before.hk.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}
	if err := before.h.Close(stdctx.Background()); err != nil {
		t.Fatal(err)
	}

	after := newEnv(t, yaml)
	again := after.signed("push", body, map[string]string{"X-GitHub-Delivery": "r-1"})
	expect(t, again, http.StatusAccepted, "")
	if again.str("message_id") != first.str("message_id") {
		t.Fatalf("after a restart the redelivery got message %s; the first %s", again.str("message_id"), first.str("message_id"))
	}
	expect(t, after.signed("push", []byte(`{"repository":{"full_name":"a/b"},"pusher":{"name":"d"}}`), map[string]string{"X-GitHub-Delivery": "r-2"}), http.StatusAccepted, "")
	events := after.turnsEnded("hooks-push", 2)
	if n := len(of(events, session.UserMessage)); n != 2 {
		t.Fatalf("%d prompts in the session; want r-1 once and r-2", n)
	}
}

func TestCloseAfterTheServerClosedTheSessions(t *testing.T) {
	e := newEnv(t, base(t, `[{tool_calls: [{name: block, arguments: "{}"}]}, {text: done}]`, "")+hooks)
	expect(t, e.signed("fresh", []byte("go"), nil), http.StatusAccepted, "")
	<-testtools.BlockStarted()
	// The server's shutdown closes every session first.
	ctx, cancel := stdctx.WithTimeout(stdctx.Background(), wait)
	defer cancel()
	if err := e.h.Sessions().Dispose(ctx); err != nil {
		t.Fatal(err)
	}
	if err := e.hk.Close(ctx); err != nil {
		t.Fatalf("Close after the sessions closed: %v", err)
	}
}
