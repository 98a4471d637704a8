package jsonl

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Many writers appending at once share syncs, and every append is in its
// file, whole and in order, when its sync returns.
func TestGroupCommitSharesSyncs(t *testing.T) {
	c := concurrentAppends(t, false)
	if n := c.count(); n >= 20*10 {
		t.Fatalf("%d syncs for %d appends: none was shared", n, 20*10)
	}
}

// With sync: file every append syncs its own file, shared with nobody.
func TestSyncFileSharesNothing(t *testing.T) {
	c := concurrentAppends(t, true)
	if n := c.count(); n != 20*10 {
		t.Fatalf("%d syncs for %d appends; want one each", n, 20*10)
	}
}

// concurrentAppends has 20 writers append 10 lines each to their own file
// at once, and checks every file holds its lines whole and in order.
func concurrentAppends(t *testing.T, alone bool) *committer {
	const writers, appends = 20, 10
	dir := t.TempDir()
	c := newCommitter(alone)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			f, fresh, err := openLog(filepath.Join(dir, fmt.Sprintf("s%d.jsonl", w)))
			if err != nil {
				t.Error(err)
				return
			}
			defer f.Close()
			for i := range appends {
				line := fmt.Sprintf("{\"seq\":%d}\n", i+1)
				if err := appendTo(f, []byte(line), func(f *os.File) error { return c.sync(f, fresh) }); err != nil {
					t.Error(err)
					return
				}
				fresh = false
			}
		})
	}
	wg.Wait()
	var want strings.Builder
	for i := range appends {
		fmt.Fprintf(&want, "{\"seq\":%d}\n", i+1)
	}
	for w := range writers {
		got, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("s%d.jsonl", w)))
		if err != nil || string(got) != want.String() {
			t.Fatalf("writer %d's file holds %q (%v)", w, got, err)
		}
	}
	return c
}

func TestConfigRefusesAnUnknownSync(t *testing.T) {
	err := Config{Dir: "s", Sync: "fast"}.Validate()
	if err == nil || !strings.Contains(err.Error(), `sync is "fast"`) {
		t.Fatalf("sync: fast: %v", err)
	}
	for _, ok := range []string{"", SyncGroup, SyncFile} {
		if err := (Config{Dir: "s", Sync: ok}).Validate(); err != nil {
			t.Fatalf("sync: %q: %v", ok, err)
		}
	}
}

// openLog opens path for appending, creating it if missing; fresh says it
// was created.
func openLog(path string) (f *os.File, fresh bool, err error) {
	f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if errors.Is(err, fs.ErrNotExist) {
		f, err = os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		fresh = true
	}
	return f, fresh, err
}
