package backendtest

import (
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// tenantName has what a tenant may hold and a careless encoding would
// break: spaces, quotes, a colon, a percent sign, non-ASCII.
const tenantName = `acme "east": 100% ü`

// tenantStored: a session's tenant is stored with its log and read back
// by another process after a restart — from a closed session's summary,
// an open one's, and a session resumed by a process that did not know
// the tenant (it keeps it) — through List and Find alike; a session given
// none has none.
func tenantStored(t *testing.T, f Fixture) {
	a := f.mount(t)
	closed := a.open(t, "agent", "closed")
	closed.SetTenant(tenantName)
	turn(closed, 1, "first", "one")
	flush(t, closed)
	a.store.Close(closed)
	mine := a.open(t, "agent", "op")
	turn(mine, 1, "first", "one")
	flush(t, mine)
	a.store.Close(mine)
	a.close(t)

	// A process that knows nothing of the tenant resumes and writes on.
	b := f.mount(t)
	scope, err := b.root.Scoped("agent")
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.store.Resume(bg, scope, "agent", "closed")
	if err != nil {
		t.Fatal(err)
	}
	turn(again, 2, "second", "two")
	flush(t, again)
	b.store.Close(again)
	open := b.open(t, "agent", "open")
	open.SetTenant("globex")
	turn(open, 1, "first", "one")
	flush(t, open)

	c := f.mount(t)
	list, err := c.store.List(bg)
	if errs.HasCode(err, session.Unsupported) {
		t.Logf("the backend cannot list: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"closed": tenantName, "open": "globex", "op": ""}
	if len(list) != len(want) {
		t.Fatalf("listed %d sessions: %+v", len(list), list)
	}
	for _, sum := range list {
		if w, ok := want[sum.ID]; !ok || sum.Tenant != w {
			t.Errorf("listed %q with tenant %q, want %q", sum.ID, sum.Tenant, w)
		}
	}
	for id, w := range want {
		sum, found, err := c.store.Find(bg, id)
		if err != nil || !found || sum.Tenant != w {
			t.Errorf("found %q: %+v %v %v, want tenant %q", id, sum, found, err, w)
		}
	}
}
