package attachments_test

import (
	stdctx "context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/attachments"
	"github.com/dsh-go/dsh/services/session"
)

func mustTime(t testing.TB, s string) time.Time {
	t.Helper()
	tm, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// logs is a Verifier over fixed session logs, counting its reads.
type logs struct {
	refs  map[string]map[string]bool
	held  map[string]bool
	reads map[string]int
}

func (l *logs) verify(_ stdctx.Context, id string) (map[string]bool, bool, error) {
	l.reads[id]++
	if l.held[id] {
		return nil, true, nil
	}
	r, ok := l.refs[id]
	if !ok {
		return nil, false, errs.New(session.NotFound, "no session "+id)
	}
	return r, false, nil
}

// A crash between storing and recording: the next start collects the
// blob no log references and keeps the one a log does.
func TestCollectRemovesWhatACrashLeftAndKeepsWhatALogReferences(t *testing.T) {
	eachBackend(t, testCollectRemovesWhatACrashLeft)
}

func testCollectRemovesWhatACrashLeft(t *testing.T, b backend) {
	s := b.open(t, attachments.Limits{})
	lost, kept, shared := pngBytes(t, 8, 8, 10), pngBytes(t, 8, 8, 11), pngBytes(t, 8, 8, 12)
	refLost, _, _ := s.Put("crashed", lost) // stored, never inserted
	refKept, _, _ := s.Put("done", kept)    // stored and in done's log
	refShared, _, _ := s.Put("crashed", shared)
	wantRefs := 2
	if b.dir != "" {
		// A session whose log was deleted by hand, long ago: only a
		// directory's markers can be aged by hand.
		s.Put("gone", shared)
		old := time.Now().Add(-2 * time.Hour)
		os.Chtimes(filepath.Join(b.dir, "refs", refShared[len(attachments.RefPrefix):], "gone"), old, old)
		wantRefs = 3
	}
	// A session with no log yet whose first prompt another process is
	// still admitting: its fresh marker stays.
	refNew, _, _ := s.Put("new", pngBytes(t, 8, 8, 16))

	l := &logs{refs: map[string]map[string]bool{
		"crashed": {},
		"done":    {refKept: true},
	}, reads: map[string]int{}}
	reopened := b.open(t, attachments.Limits{})
	got, err := reopened.Collect(t.Context(), l.verify, nil)
	if err != nil {
		t.Fatal(err)
	}
	if reopened.Has(refLost) || reopened.Has(refShared) {
		t.Fatal("a blob no log references survived the collection")
	}
	if !reopened.Has(refKept) {
		t.Fatal("the collection removed a blob a session log references")
	}
	if !reopened.Has(refNew) {
		t.Fatal("the collection removed the fresh blob of a session whose log is not written yet")
	}
	if got.Blobs != 2 || got.Refs != wantRefs || got.Verified != 1 {
		t.Fatalf("collected %+v; want 2 blobs, %d refs, 1 verified", got, wantRefs)
	}
	for id, n := range l.reads {
		if n != 1 {
			t.Errorf("read the log of %s %d times; want once", id, n)
		}
	}
	// A verified marker is not read again.
	l.reads = map[string]int{}
	if _, err := b.open(t, attachments.Limits{}).Collect(t.Context(), l.verify, nil); err != nil {
		t.Fatal(err)
	}
	delete(l.reads, "new") // unverified until its log appears: asked again
	if len(l.reads) != 0 {
		t.Fatalf("the second collection read logs %v; verified markers need no read", l.reads)
	}
}

// A session another process holds may be between storing and recording:
// its blobs stay. A log that cannot be read keeps its blobs too.
func TestCollectKeepsTheBlobsOfHeldAndUnreadableSessions(t *testing.T) {
	eachBackend(t, testCollectKeepsHeld)
}

func testCollectKeepsHeld(t *testing.T, b backend) {
	s := b.open(t, attachments.Limits{})
	refHeld, _, _ := s.Put("busy", pngBytes(t, 8, 8, 13))
	refBad, _, _ := s.Put("broken", pngBytes(t, 8, 8, 14))
	verify := func(_ stdctx.Context, id string) (map[string]bool, bool, error) {
		if id == "busy" {
			return nil, true, nil
		}
		return nil, false, errors.New("disk on fire")
	}
	reopened := b.open(t, attachments.Limits{})
	_, err := reopened.Collect(t.Context(), verify, nil)
	if err == nil {
		t.Fatal("an unreadable log was not reported")
	}
	if !reopened.Has(refHeld) || !reopened.Has(refBad) {
		t.Fatal("a blob of a held or unreadable session was collected")
	}
}

// What this process still holds (a delivery in flight) is never
// collected, whatever the log says.
func TestCollectLeavesLiveHolds(t *testing.T) {
	eachBackend(t, testCollectLeavesLiveHolds)
}

func testCollectLeavesLiveHolds(t *testing.T, b backend) {
	s := b.open(t, attachments.Limits{})
	ref, release, _ := s.Put("s1", pngBytes(t, 8, 8, 15))
	l := &logs{refs: map[string]map[string]bool{"s1": {}}, reads: map[string]int{}}
	if _, err := s.Collect(t.Context(), l.verify, nil); err != nil {
		t.Fatal(err)
	}
	if !s.Has(ref) {
		t.Fatal("Collect removed a blob a live delivery holds")
	}
	release()
	if s.Has(ref) {
		t.Fatal("the release after Collect left the blob")
	}
}

// A session whose log was deleted by hand, after its markers were
// verified: with a catalog, the next collection drops them and the blob.
func TestCollectDropsVerifiedMarkersOfSessionsThatNoLongerExist(t *testing.T) {
	eachBackend(t, testCollectDropsVerified)
}

func testCollectDropsVerified(t *testing.T, b backend) {
	s := b.open(t, attachments.Limits{})
	gone, kept := pngBytes(t, 8, 8, 20), pngBytes(t, 8, 8, 21)
	refGone, _, _ := s.Put("gone", gone)
	refKept, _, _ := s.Put("kept", kept)
	l := &logs{refs: map[string]map[string]bool{"gone": {refGone: true}, "kept": {refKept: true}}, reads: map[string]int{}}
	if _, err := b.open(t, attachments.Limits{}).Collect(t.Context(), l.verify, nil); err != nil { // both verified
		t.Fatal(err)
	}
	known := func(stdctx.Context) (map[string]bool, error) { return map[string]bool{"kept": true}, nil }
	reopened := b.open(t, attachments.Limits{})
	got, err := reopened.Collect(t.Context(), l.verify, known)
	if err != nil {
		t.Fatal(err)
	}
	if reopened.Has(refGone) || !reopened.Has(refKept) || got.Blobs != 1 {
		t.Fatalf("collected %+v; want the deleted session's blob gone and the other kept", got)
	}
	// A catalog that fails keeps everything verified.
	failing := func(stdctx.Context) (map[string]bool, error) { return nil, errors.New("cannot list") }
	if _, err := b.open(t, attachments.Limits{}).Collect(t.Context(), l.verify, failing); err == nil || !reopened.Has(refKept) {
		t.Fatalf("a failing catalog: %v", err)
	}
}

// The sessions are listed only when a verified marker needs them, once:
// a host start on a store with no attachment (dsh sessions list on
// 100,000 sessions) must not list them all.
func TestCollectListsTheSessionsOnlyForAVerifiedMarker(t *testing.T) {
	eachBackend(t, testCollectListsOnlyWhenNeeded)
}

func testCollectListsOnlyWhenNeeded(t *testing.T, b backend) {
	calls := 0
	known := func(stdctx.Context) (map[string]bool, error) {
		calls++
		return map[string]bool{"a": true, "b": true}, nil
	}
	l := &logs{refs: map[string]map[string]bool{}, reads: map[string]int{}}
	if _, err := b.open(t, attachments.Limits{}).Collect(t.Context(), l.verify, known); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("an empty store listed the sessions %d times", calls)
	}
	s := b.open(t, attachments.Limits{})
	refA, _, _ := s.Put("a", pngBytes(t, 8, 8, 40))
	refB, _, _ := s.Put("b", pngBytes(t, 8, 8, 41))
	l.refs = map[string]map[string]bool{"a": {refA: true}, "b": {refB: true}}
	if _, err := b.open(t, attachments.Limits{}).Collect(t.Context(), l.verify, known); err != nil { // verifies both
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("unverified markers listed the sessions %d times", calls)
	}
	reopened := b.open(t, attachments.Limits{})
	if _, err := reopened.Collect(t.Context(), l.verify, known); err != nil {
		t.Fatal(err)
	}
	if calls != 1 || !reopened.Has(refA) || !reopened.Has(refB) {
		t.Fatalf("two verified markers: listed %d times (want 1), blobs kept %v %v", calls, reopened.Has(refA), reopened.Has(refB))
	}
}

// Once a closed session's holds are forgotten, what its log does not
// back is collected like anything a crash left.
func TestForgetLetsCollectTakeWhatTheLogDoesNotBack(t *testing.T) {
	eachBackend(t, testForgetLetsCollect)
}

func testForgetLetsCollect(t *testing.T, b backend) {
	s := b.open(t, attachments.Limits{})
	ref, _, _ := s.Put("s1", pngBytes(t, 8, 8, 30)) // a delivery that never settled
	logged, _, _ := s.Put("s1", pngBytes(t, 8, 8, 31))
	s.Forget("s1")
	l := &logs{refs: map[string]map[string]bool{"s1": {logged: true}}, reads: map[string]int{}}
	if _, err := s.Collect(t.Context(), l.verify, nil); err != nil {
		t.Fatal(err)
	}
	if s.Has(ref) || !s.Has(logged) {
		t.Fatal("after Forget, Collect kept the unlogged blob or dropped the logged one")
	}
}

// TestRefsOfKeepsCheckpoints: the manifests and packs checkpoints and
// rewinds name are references of their session, so collection keeps them
// while the log does.
func TestRefsOfKeepsCheckpoints(t *testing.T) {
	m1, p1, m2, p2 := attachments.RefOf([]byte("m1")), attachments.RefOf([]byte("p1")), attachments.RefOf([]byte("m2")), attachments.RefOf([]byte("p2"))
	refs := attachments.RefsOf([]session.Event{
		{Seq: 1, Type: session.Checkpointed, Checkpoint: &session.Checkpoint{Manifest: m1, Blobs: []string{p1}}},
		{Seq: 2, Type: session.Rewound, Rewind: &session.Rewind{Manifest: m2, Blobs: []string{p2}}},
		{Seq: 3, Type: session.Redone, Rewind: &session.Rewind{Redo: 2}},
	})
	if len(refs) != 4 || !refs[m1] || !refs[p1] || !refs[m2] || !refs[p2] {
		t.Fatalf("refs %v", refs)
	}
}
