package jsonl_test

import (
	stdctx "context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// TestTheStoreListsAndDeletesThroughThePlugin: a log the agent loop wrote
// names its agent and first prompt; the session a running agent holds is
// open and cannot be deleted, another one can.
func TestTheStoreListsAndDeletesThroughThePlugin(t *testing.T) {
	dir := t.TempDir()
	path, _ := oneTurn(t, dir)
	raw, _ := os.ReadFile(path)
	if err := os.WriteFile(filepath.Join(dir, "copy.jsonl"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	h := start(t, dir, true)
	defer h.Close(stdctx.Background())
	st, err := session.Key.Get(h.Root())
	if err != nil {
		t.Fatal(err)
	}
	ctx := stdctx.Background()
	list, err := st.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]session.Summary{}
	for _, s := range list {
		got[s.ID] = s
	}
	if s := got["s1"]; len(list) != 2 || s.State != session.StateOpen || !strings.Contains(s.Holder, `"main"`) {
		t.Fatalf("listed %+v", list)
	}
	if c := got["copy"]; c.Agent != "main" || c.Title != "one" || c.Turns != 1 || c.State != session.StateIdle || c.Size != int64(len(raw)) {
		t.Fatalf("copy: %+v", c)
	}
	// Found by id as listed: the store marks the one its agent holds.
	for id, want := range got {
		if s, found, err := st.Find(ctx, id); err != nil || !found || s.State != want.State || s.Holder != want.Holder || s.Title != want.Title {
			t.Fatalf("Find(%s): %+v %v %v; listed %+v", id, s, found, err, want)
		}
	}
	if _, found, err := st.Find(ctx, "nobody"); found || err != nil {
		t.Fatalf("Find of a session never stored: %v %v", found, err)
	}
	if err := st.Delete(ctx, "s1"); !errs.HasCode(err, session.SessionLocked) {
		t.Fatalf("delete of the running agent's session: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal("a refused delete removed the log")
	}
	if err := st.Delete(ctx, "copy"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "copy.jsonl")); !os.IsNotExist(err) {
		t.Fatal("the deleted log is still there")
	}
	if _, found, err := st.Find(ctx, "copy"); found || err != nil {
		t.Fatalf("Find of a deleted session: %v %v", found, err)
	}
}
