package jsonl

import (
	stdctx "context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/dsh-go/dsh/services/session"
)

// TestFindAgreesWithTheListing: a session found by its id is described
// as the listing describes it — ended, cut inside a turn, corrupt, empty,
// held by a writer — and an id with no log, or that is no session id, is
// not found.
func TestFindAgreesWithTheListing(t *testing.T) {
	dir := t.TempDir()
	w := newFiles(dir)
	writeLog(t, w, "done", "main", turn(1, "first", true), turn(2, "again", true))
	writeLog(t, w, "cut", "coder", turn(1, "first", true), turn(2, "second", false))
	writeLog(t, w, "here", "main", turn(1, "held by a writer", true))
	os.WriteFile(filepath.Join(dir, "corrupt.jsonl"), []byte("this is not json\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "empty.jsonl"), nil, 0o600)
	wr, err := w.lock("here", true)
	if err != nil {
		t.Fatal(err)
	}
	defer wr.Release()
	ctx := stdctx.Background()
	list, err := w.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 5 {
		t.Fatalf("listed %d sessions, want 5: %+v", len(list), list)
	}
	states := map[session.State]bool{}
	for _, l := range list {
		g, found, err := w.Find(ctx, l.ID)
		if err != nil || !found {
			t.Fatalf("Find(%q): found %v, %v; it is listed", l.ID, found, err)
		}
		if g.ID != l.ID || g.Agent != l.Agent || g.Title != l.Title || !g.Created.Equal(l.Created) ||
			!g.Updated.Equal(l.Updated) || g.Turns != l.Turns || g.State != l.State || g.Size != l.Size || g.Holder != l.Holder {
			t.Errorf("session %s:\n found  %+v\n listed %+v", l.ID, g, l)
		}
		states[g.State] = true
	}
	for _, st := range []session.State{session.StateIdle, session.StateInterrupted, session.StateOpen, session.StateCorrupt} {
		if !states[st] {
			t.Errorf("no session was %s: the comparison missed a case", st)
		}
	}
	for _, id := range []string{"missing", "../done", "done.jsonl", ""} {
		if s, found, err := w.Find(ctx, id); found || err != nil {
			t.Errorf("Find(%q) = %+v, %v, %v; want not found", id, s, found, err)
		}
	}
}

// BenchmarkFindAmongStored: finding one of 2,000 stored sessions, against
// listing them all (what a lookup by id cost before Find).
func BenchmarkFindAmongStored(b *testing.B) {
	dir := b.TempDir()
	genStore(b, dir, 2000, 4)
	w := newFiles(dir)
	ctx := stdctx.Background()
	if _, err := w.List(ctx); err != nil { // writes the catalog
		b.Fatal(err)
	}
	b.Run("find", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, found, err := w.Find(ctx, fmt.Sprintf("g%06d", i%2000)); !found || err != nil {
				b.Fatal(found, err)
			}
		}
	})
	b.Run("list", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := w.List(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
