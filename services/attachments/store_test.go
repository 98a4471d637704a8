package attachments_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/attachments"
)

// Two sessions storing the same bytes share one blob, written once; it
// goes when the last of them releases it.
func TestTheSameBytesAreStoredOnceAndGoWithTheLastRelease(t *testing.T) {
	eachBackend(t, testTheSameBytesAreStoredOnce)
}

func testTheSameBytesAreStoredOnce(t *testing.T, b backend) {
	s := b.open(t, attachments.Limits{})
	img := pngBytes(t, 8, 8, 1)
	ref1, rel1, err := s.Put("s1", img)
	if err != nil {
		t.Fatal(err)
	}
	ref2, rel2, err := s.Put("s2", img)
	if err != nil {
		t.Fatal(err)
	}
	if ref1 != ref2 || ref1 != attachments.RefOf(img) {
		t.Fatalf("refs %s and %s for the same bytes", ref1, ref2)
	}
	if s.Written() != int64(len(img)) {
		t.Fatalf("wrote %d bytes for one blob of %d", s.Written(), len(img))
	}
	if b.dir != "" {
		if got := blobFiles(t, b.dir); len(got) != 1 {
			t.Fatalf("blob directory holds %v; want one blob and no temp file", got)
		}
	}
	if got := referrers(t, s, ref1); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Fatalf("the blob is referenced by %v; want s1 and s2", got)
	}
	rel1()
	if !s.Has(ref1) {
		t.Fatal("the blob went while session s2 still references it")
	}
	rel2()
	rel2() // a second call does nothing
	if s.Has(ref1) {
		t.Fatal("the blob stayed after its last reference was released")
	}
	if m := referrers(t, s, ref1); len(m) != 0 {
		t.Fatalf("markers left: %v", m)
	}
}

// A release drops only what its own Put added: a reference the session
// held before (a message already in its log, from an earlier run) stays.
func TestAReleaseKeepsAReferenceTheSessionHadBefore(t *testing.T) {
	eachBackend(t, testAReleaseKeepsAReference)
}

func testAReleaseKeepsAReference(t *testing.T, b backend) {
	img := pngBytes(t, 8, 8, 2)
	if _, _, err := b.open(t, attachments.Limits{}).Put("s1", img); err != nil { // never released: in the log
		t.Fatal(err)
	}
	s := b.open(t, attachments.Limits{}) // the next run
	ref, rel, err := s.Put("s1", img)
	if err != nil {
		t.Fatal(err)
	}
	rel()
	if !s.Has(ref) || !slices.Equal(referrers(t, s, ref), []string{"s1"}) {
		t.Fatal("a refused delivery removed the reference an earlier message of the session holds")
	}
}

// Two live takers in one session: the first to be released leaves the
// reference to the other.
func TestAReleaseLeavesTheReferenceOfAnotherLiveTaker(t *testing.T) {
	s := attachments.NewMemory(attachments.Limits{})
	img := pngBytes(t, 8, 8, 3)
	ref, rel1, _ := s.Put("s1", img)
	_, rel2, _ := s.Put("s1", img) // a tool's image, say, kept
	_ = rel2
	rel1()
	if !s.Has(ref) {
		t.Fatal("releasing one delivery removed a blob another message of the session took")
	}
}

func TestReleaseSessionRemovesOnlyBlobsNoOtherSessionReferences(t *testing.T) {
	eachBackend(t, testReleaseSession)
}

// testReleaseSession: the sessions write from two stores, as two hosts
// would; the delete of one leaves the blob both reference to the other.
func testReleaseSession(t *testing.T, b backend) {
	s, other := b.open(t, attachments.Limits{}), b.open(t, attachments.Limits{})
	shared, own := pngBytes(t, 8, 8, 4), pngBytes(t, 8, 8, 5)
	refShared, _, _ := s.Put("s1", shared)
	refOwn, _, _ := s.Put("s1", own)
	other.Put("s2", shared)
	if err := s.ReleaseSession("s1"); err != nil {
		t.Fatal(err)
	}
	if s.Has(refOwn) || other.Has(refOwn) {
		t.Fatal("the blob only s1 referenced survived its deletion")
	}
	if got, err := other.Get(refShared); err != nil || string(got) != string(shared) || !slices.Equal(referrers(t, other, refShared), []string{"s2"}) {
		t.Fatalf("deleting s1 took the blob s2 still references: %v", err)
	}
	if err := other.ReleaseSession("s2"); err != nil || s.Has(refShared) {
		t.Fatalf("deleting s2 too left the blob: %v", err)
	}
}

func TestReferencesAndSessionIDsCannotNameOtherFiles(t *testing.T) {
	s := openStore(t, t.TempDir())
	for _, ref := range []string{"sha256:../../etc/passwd", "md5:abc", "sha256:" + string(make([]byte, 64))} {
		if _, err := s.Get(ref); !errs.HasCode(err, attachments.BadPart) {
			t.Errorf("Get(%q): %v; want %s", ref, err, attachments.BadPart)
		}
	}
	for _, id := range []string{"", ".", ".."} {
		if _, _, err := s.Put(id, []byte("hi")); !errs.HasCode(err, errs.InvalidArgument) {
			t.Errorf("Put with session %q: %v", id, err)
		}
	}
}

// Any other session id names a marker inside the blob's reference
// directory: an in-memory agent's session may hold '/' or '@'.
func TestSessionIDsAreEscapedIntoMarkerNames(t *testing.T) {
	eachBackend(t, testSessionIDsAreEscaped)
}

func testSessionIDsAreEscaped(t *testing.T, b backend) {
	s := b.open(t, attachments.Limits{})
	img := pngBytes(t, 8, 8, 7)
	ref, release, err := s.Put("../../x@y", img)
	if err != nil {
		t.Fatal(err)
	}
	if b.dir != "" {
		if got := markers(t, b.dir, ref); !slices.Equal(got, []string{"..%2F..%2Fx@y"}) {
			t.Fatalf("markers %v", got)
		}
	}
	if got := referrers(t, s, ref); !slices.Equal(got, []string{"../../x@y"}) {
		t.Fatalf("referrers %v", got)
	}
	release()
	if s.Has(ref) {
		t.Fatal("the release left the blob")
	}
	s.Put("a/b", img)
	if err := s.ReleaseSession("a/b"); err != nil || s.Has(ref) {
		t.Fatalf("ReleaseSession of an escaped id: %v", err)
	}
}

func TestAMissingBlobIsNotFound(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, attachments.Limits{})
		_, err := s.Get(attachments.RefOf([]byte("never stored")))
		if !errs.HasCode(err, attachments.NotFound) {
			t.Fatalf("got %v; want %s", err, attachments.NotFound)
		}
		if _, err := s.Hold("s1", attachments.RefOf([]byte("never stored"))); !errs.HasCode(err, attachments.NotFound) {
			t.Fatalf("holding a blob never stored: %v; want %s", err, attachments.NotFound)
		}
	})
}

// The store's limit refuses a new blob that would take it past it, from
// whichever process or host; bytes already stored always pass.
func TestTheStoreLimitRefusesNewBlobsOnly(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		// JetStream counts its bookkeeping too: about 500 bytes per blob.
		limits := attachments.Limits{Store: 2900}
		s, other := b.open(t, limits), b.open(t, limits)
		first, second, third := make([]byte, 1000), make([]byte, 1000), make([]byte, 1000)
		first[0], second[0], third[0] = 1, 2, 3
		if _, _, err := s.Put("s1", first); err != nil {
			t.Fatal(err)
		}
		if _, _, err := other.Put("s2", second); err != nil {
			t.Fatal(err)
		}
		_, _, err := other.Put("s2", third)
		if !errs.HasCode(err, attachments.StoreFull) || !strings.Contains(err.Error(), "max_store_bytes") {
			t.Fatalf("a blob past the store's limit: %v; want %s naming the setting", err, attachments.StoreFull)
		}
		if other.Has(attachments.RefOf(third)) || len(referrers(t, other, attachments.RefOf(third))) != 0 {
			t.Fatal("a refused blob left its bytes or its marker")
		}
		if _, _, err := other.Put("s3", first); err != nil {
			t.Fatalf("bytes already stored were refused: %v", err)
		}
	})
}

// Two stores (processes, hosts) race on one blob: one takes and releases
// it over and over while the other holds it. The lock keeps every
// removal from landing between the holder's marker and its check that the
// blob is there: whenever the holder holds, the blob is stored.
func TestABlobHeldElsewhereIsNeverRemovedUnderTheHolder(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		churn, holder := b.open(t, attachments.Limits{}), b.open(t, attachments.Limits{})
		img := pngBytes(t, 8, 8, 40)
		rounds := 40
		if testing.Short() {
			rounds = 10
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range rounds {
				if _, release, err := churn.Put("churn", img); err == nil {
					release()
				}
			}
		}()
		for range rounds {
			ref, release, err := holder.Put("holder", img)
			if err != nil {
				t.Fatal(err)
			}
			if !holder.Has(ref) {
				t.Fatal("the blob was removed while a session of another store held it")
			}
			release()
		}
		<-done
	})
}

// A temp file an interrupted write left is swept by Collect once it is
// old enough not to be another process's write in progress.
func TestCollectSweepsStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	stale, fresh := filepath.Join(dir, "blobs", ".tmp-1"), filepath.Join(dir, "blobs", ".tmp-2")
	os.WriteFile(stale, []byte("half"), 0o600)
	os.WriteFile(fresh, []byte("half"), 0o600)
	old := mustTime(t, "2026-01-01T00:00:00Z")
	os.Chtimes(stale, old, old)
	if _, err := s.Collect(t.Context(), nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := blobFiles(t, dir); !slices.Equal(got, []string{".tmp-2"}) {
		t.Fatalf("after Collect the blob directory holds %v; want only the fresh temp file", got)
	}
}

// Blobs read for model requests are kept in memory, but a released blob
// is never served from there.
func TestAReleasedBlobIsNotServedFromMemory(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	img := pngBytes(t, 8, 8, 6)
	ref, release, _ := s.Put("s1", img)
	if _, err := s.Get(ref); err != nil {
		t.Fatal(err)
	}
	// Read again with the file gone behind the store's back: from memory.
	os.Rename(filepath.Join(dir, "blobs", ref[len(attachments.RefPrefix):]), filepath.Join(dir, "elsewhere"))
	if got, err := s.Get(ref); err != nil || string(got) != string(img) {
		t.Fatalf("second read: %v", err)
	}
	os.Rename(filepath.Join(dir, "elsewhere"), filepath.Join(dir, "blobs", ref[len(attachments.RefPrefix):]))
	release()
	if _, err := s.Get(ref); !errs.HasCode(err, attachments.NotFound) {
		t.Fatalf("a released blob read as %v; want %s", err, attachments.NotFound)
	}
}
