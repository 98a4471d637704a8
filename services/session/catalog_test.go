package session_test

import (
	stdctx "context"
	"strings"
	"testing"
	"time"

	dshctx "github.com/dsh-go/dsh/context"
	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
	"github.com/hashicorp/go-hclog"
)

// catalogBackend lists and deletes from a fixed set of summaries.
type catalogBackend struct {
	fakeLocker
	list    []session.Summary
	deleted []string
}

func (c *catalogBackend) List(stdctx.Context) ([]session.Summary, error) {
	return append([]session.Summary(nil), c.list...), nil
}

func (c *catalogBackend) Delete(_ stdctx.Context, id string) error {
	for i, s := range c.list {
		if s.ID == id {
			c.list = append(c.list[:i], c.list[i+1:]...)
			c.deleted = append(c.deleted, id)
			return nil
		}
	}
	return errs.New(session.NotFound, "none")
}

func withBackend(t *testing.T, b session.Backend) (*dshctx.Context, *session.Store) {
	t.Helper()
	root := dshctx.New(dshctx.WithLogger(hclog.NewNullLogger()))
	t.Cleanup(func() { root.Dispose(stdctx.Background()) })
	st := session.NewStore()
	if b != nil {
		if err := st.SetBackend(root, b); err != nil {
			t.Fatal(err)
		}
	}
	return root, st
}

func TestStoreListAndDeleteNeedABackendThatCan(t *testing.T) {
	ctx := stdctx.Background()
	_, none := withBackend(t, nil)
	if _, err := none.List(ctx); !errs.HasCode(err, session.NoPersistence) {
		t.Fatalf("list without a backend: %v", err)
	}
	if err := none.Delete(ctx, "s"); !errs.HasCode(err, session.NoPersistence) {
		t.Fatalf("delete without a backend: %v", err)
	}
	_, plain := withBackend(t, &fakeLocker{held: map[string]bool{}})
	if _, err := plain.List(ctx); !errs.HasCode(err, session.Unsupported) || !strings.Contains(err.Error(), "cannot list") {
		t.Fatalf("list with a backend that cannot: %v", err)
	}
	if err := plain.Delete(ctx, "s"); !errs.HasCode(err, session.Unsupported) || !strings.Contains(err.Error(), `"s"`) {
		t.Fatalf("delete with a backend that cannot: %v", err)
	}
	if err := plain.Delete(ctx, ""); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("delete without an id: %v", err)
	}
}

func TestStoreListSortsAndMarksSessionsOpenHere(t *testing.T) {
	ctx := stdctx.Background()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b := &catalogBackend{fakeLocker: fakeLocker{held: map[string]bool{}}, list: []session.Summary{
		{ID: "old", Updated: at, State: session.StateIdle},
		{ID: "live", Updated: at.Add(time.Hour), State: session.StateIdle},
		{ID: "b", Updated: at.Add(2 * time.Hour), State: session.StateInterrupted},
		{ID: "a", Updated: at.Add(2 * time.Hour), State: session.StateIdle},
	}}
	root, st := withBackend(t, b)
	s, err := st.Create(root, "agent-7", "live")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(s)
	list, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, x := range list {
		ids = append(ids, x.ID)
	}
	if strings.Join(ids, ",") != "a,b,live,old" {
		t.Fatalf("order %v; want the most recently updated first, then by id", ids)
	}
	if l := list[2]; l.State != session.StateOpen || !strings.Contains(l.Holder, `"agent-7"`) {
		t.Fatalf("a session open in this store lists as %+v", l)
	}

	// Deleting a session open here is refused before the backend is asked.
	err = st.Delete(ctx, "live")
	if !errs.Has(err, session.SessionLocked, session.ReasonOpenHere) || !strings.Contains(err.Error(), `"agent-7"`) {
		t.Fatalf("delete of an open session: %v", err)
	}
	if len(b.deleted) != 0 {
		t.Fatalf("the backend deleted %v", b.deleted)
	}
	if err := st.Delete(ctx, "old"); err != nil || strings.Join(b.deleted, ",") != "old" {
		t.Fatalf("delete: %v, deleted %v", err, b.deleted)
	}
	if err := st.Delete(ctx, "old"); !errs.HasCode(err, session.NotFound) {
		t.Fatalf("delete of a missing session: %v", err)
	}
}

func TestTitle(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"  fix\n\tthe   build \n", "fix the build"},
		{"<command-name>/review-pr</command-name>\n<command-args>456 high alice</command-args>\n\nReview PR #456", "/review-pr 456 high alice"},
		{"<command-name>/optimize</command-name>\n\nAnalyze this code", "/optimize"},
		{"<command-name>/fix</command-name> <command-args>123</command-args>  Fix issue #123", "/fix 123"},
		{strings.Repeat("é", session.TitleMax), strings.Repeat("é", session.TitleMax)},
		{strings.Repeat("é", session.TitleMax+1), strings.Repeat("é", session.TitleMax-1) + "…"},
		{strings.Repeat("ab ", 100), strings.Repeat("ab ", 26) + "a…"},
	} {
		if got := session.Title(c.in); got != c.want {
			t.Errorf("Title(%q) = %q; want %q", c.in, got, c.want)
		}
	}
}

func TestChildIDLinksToItsParent(t *testing.T) {
	id := session.ChildID("main-session-1", "call_1-ab12cd34")
	if !session.ValidID(id) {
		t.Fatalf("%q is not a valid session id", id)
	}
	if p, ok := session.ParentOf(id); !ok || p != "main-session-1" {
		t.Fatalf("ParentOf(%q) = %q, %v", id, p, ok)
	}
	// A grandchild's parent is the child.
	if p, _ := session.ParentOf(session.ChildID(id, "call_2-00000000")); p != id {
		t.Fatalf("a grandchild's parent is %q", p)
	}
	for _, plain := range []string{"main-session-1", ".sub-x", "a.subway"} {
		if p, ok := session.ParentOf(plain); ok {
			t.Fatalf("ParentOf(%q) = %q, true", plain, p)
		}
	}
}
