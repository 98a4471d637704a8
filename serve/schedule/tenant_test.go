package schedule_test

import (
	stdctx "context"
	"testing"
)

// A schedule with a tenant opens its session for that tenant.
func TestAScheduleTenantOwnsItsSession(t *testing.T) {
	e := newEnv(t, "", `serve:
  schedules:
    - name: quarter
      cron: "*/15 * * * *"
      session: sched-acme
      tenant: acme
      prompt: "{{.Name}}"
`)
	e.start()
	e.clock.set(at("10:00"))
	e.waitPrompts("sched-acme", "quarter")
	in, err := e.h.Sessions().Info(stdctx.Background(), "sched-acme")
	if err != nil || in.Tenant != "acme" {
		t.Fatalf("the schedule's session: tenant %q, %v", in.Tenant, err)
	}
}
