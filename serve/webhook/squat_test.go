package webhook_test

import (
	stdctx "context"
	"net/http"
	"testing"

	"github.com/dsh-go/dsh/serve/unattended"
	"github.com/dsh-go/dsh/services/sessions"
)

// A tenant may open a session under any free id, a webhook's fixed
// session's among them (before its first delivery, or after it was
// deleted). A delivery must then not go into that session: the webhook's
// payloads would be read by the squatting tenant, and a webhook with a
// tenant would make the squatter's history its tenant's. Open or closed,
// a fixed session of another tenant is refused and left as it was.
func TestAWebhookRefusesAnotherTenantsSession(t *testing.T) {
	e := newEnv(t, base(t, "", "")+`serve:
  webhooks:
    acme:
      secret_env: S
      session: acme-inbox
      tenant: acme
      prompt: "acme {{.Raw}}"
    ops:
      secret_env: S
      session: ops-inbox
      prompt: "ops {{.Raw}}"
`)
	ctx := stdctx.Background()
	svc := e.h.Sessions()
	for _, id := range []string{"acme-inbox", "ops-inbox"} {
		if _, err := svc.Ensure(ctx, sessions.EnsureOptions{Mode: sessions.EnsureCreate,
			OpenOptions: sessions.OpenOptions{Agent: "main", AgentID: "main@" + id, SessionID: id, Tenant: "globex"}}); err != nil {
			t.Fatal(err)
		}
	}
	for name, id := range map[string]string{"acme": "acme-inbox", "ops": "ops-inbox"} {
		r := e.signed(name, []byte("x"), nil)
		if r.status != http.StatusConflict || r.str("code") != string(unattended.ForeignSession) {
			t.Errorf("webhook %q into globex's open session %q: %d %v; want 409 %s", name, id, r.status, r.body, unattended.ForeignSession)
		}
		if in, err := svc.Info(ctx, id); err != nil || in.Tenant != "globex" {
			t.Errorf("session %q after the delivery: %+v %v", id, in, err)
		}
		if evs, err := svc.History(ctx, id, 0); err != nil || len(evs) != 0 {
			t.Errorf("session %q got %d events (%v): %+v", id, len(evs), err, evs)
		}
	}
}
