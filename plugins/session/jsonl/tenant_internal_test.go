package jsonl

import (
	stdctx "context"
	"os"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/session"
)

// writeTenantLog writes one ended turn of session id as tenant's, and
// closes it, so the catalog gets its closed line.
func writeTenantLog(t *testing.T, w *files, id, tenant string) {
	t.Helper()
	wr, err := w.lock(id, true)
	if err != nil {
		t.Fatal(err)
	}
	var seq int64
	for _, e := range turn(1, "hello "+id, true) {
		seq++
		e.Seq, e.Time = seq, t0.Add(time.Duration(seq)*time.Second)
		wr.add("main", tenant, e)
	}
	if err := wr.write(seq); err != nil {
		t.Fatal(err)
	}
	wr.Release()
}

// A session's tenant is a column after the title on its closed catalog
// line, which the head-only reader skips: every way a listing reads the
// catalog — the directory reconciled against a stale census, the census
// trusted, a compacted catalog, a page, a Find — must still give it, and
// a tenantless session none. A title must not swallow the column.
func TestTheTenantColumnSurvivesEveryListing(t *testing.T) {
	w := newFiles(t.TempDir())
	want := map[string]string{"a": `acme "east": 100% ü`, "b": "", "c": "globex"}
	for id, tenant := range want {
		writeTenantLog(t, w, id, tenant)
	}
	check := func(how string, list []session.Summary) {
		t.Helper()
		if len(list) != len(want) {
			t.Fatalf("%s: listed %d sessions, want %d", how, len(list), len(want))
		}
		for _, s := range list {
			if s.Tenant != want[s.ID] {
				t.Errorf("%s: session %q has tenant %q, want %q", how, s.ID, s.Tenant, want[s.ID])
			}
			if s.Title != "hello "+s.ID {
				t.Errorf("%s: session %q has title %q", how, s.ID, s.Title)
			}
		}
	}
	check("no census", slow(t, w))
	settle(t, w)
	check("census trusted", fast(t, w))
	p, err := w.ListPage(stdctx.Background(), session.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	q, err := w.ListPage(stdctx.Background(), session.ListOptions{Limit: 2, Cursor: p.Next})
	if err != nil {
		t.Fatal(err)
	}
	check("pages with the census", append(p.Sessions, q.Sessions...))
	// The census made stale under the catalog: the directory is read
	// again and the closed lines reconciled against it.
	past := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(w.dir, past, past); err != nil {
		t.Fatal(err)
	}
	check("stale census", slow(t, w))
	// A new catalog from the lines (compaction keeps them raw).
	cat, err := readCatalog(w.dir + "/" + catalogName)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.compact(cat, nil); err != nil {
		t.Fatal(err)
	}
	check("compacted", sameAsLogs(t, w))
	for id, tenant := range want {
		s, found, err := w.Find(stdctx.Background(), id)
		if err != nil || !found || s.Tenant != tenant {
			t.Errorf("Find(%q) = %+v %v %v; want tenant %q", id, s, found, err, tenant)
		}
	}
}
