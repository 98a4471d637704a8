package webhook_test

import (
	stdctx "context"
	"net/http"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/serve/webhook"
)

// A webhook with a tenant opens its sessions for that tenant, fixed and
// fresh alike, and they are stored so; one without opens operators'
// sessions; a tenant that cannot be stored is refused at start.
func TestAWebhooksTenantOwnsItsSessions(t *testing.T) {
	e := newEnv(t, base(t, "", "")+`serve:
  webhooks:
    fixed:
      secret_env: S
      session: acme-inbox
      tenant: acme
      prompt: "fixed {{.Raw}}"
    fresh:
      secret_env: S
      tenant: acme
      prompt: "fresh {{.Raw}}"
    ops:
      secret_env: S
      session: ops-inbox
      prompt: "ops {{.Raw}}"
`)
	expect(t, e.signed("fixed", []byte("x"), nil), http.StatusAccepted, "")
	e.turnsEnded("acme-inbox", 1)
	if in, err := e.h.Sessions().Info(stdctx.Background(), "acme-inbox"); err != nil || in.Tenant != "acme" {
		t.Fatalf("the fixed session: %+v %v", in, err)
	}
	f := e.signed("fresh", []byte("y"), nil)
	expect(t, f, http.StatusAccepted, "")
	fresh := f.str("session")
	expect(t, e.signed("ops", []byte("z"), nil), http.StatusAccepted, "")
	e.turnsEnded("ops-inbox", 1)
	waitUntil(t, "the fresh session stored", func() bool {
		for _, s := range e.persisted() {
			if s.ID == fresh && s.Turns == 1 {
				return true
			}
		}
		return false
	})
	for _, s := range e.persisted() {
		want := map[string]string{"acme-inbox": "acme", fresh: "acme", "ops-inbox": ""}[s.ID]
		if s.Tenant != want {
			t.Errorf("stored %q with tenant %q, want %q", s.ID, s.Tenant, want)
		}
	}

	cfg, err := config.Parse("bad.yaml", []byte(base(t, "", "")+"serve:\n  webhooks:\n    bad:\n      secret_env: S\n      tenant: \"a\\tb\"\n      prompt: x\n"), config.LoadOptions{Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = webhook.New(webhook.Options{Sessions: e.h.Sessions(), Config: cfg, Getenv: func(string) string { return secret }})
	if err == nil || !strings.Contains(err.Error(), `webhook "bad"`) || !strings.Contains(err.Error(), "tenant") {
		t.Fatalf("a tenant with a tab: %v", err)
	}
}
