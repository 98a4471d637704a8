package jsonl

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// Many writers appending at once share syncs, and every append is in its
// file, whole and in order, when its sync returns.
func TestGroupCommitSharesSyncs(t *testing.T) {
	const writers, appends = 20, 10
	dir := t.TempDir()
	c := newCommitter()
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
	if n := c.count(); n >= writers*appends {
		t.Fatalf("%d syncs for %d appends: none was shared", n, writers*appends)
	}
}
