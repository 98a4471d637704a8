package jsonl

import (
	stdctx "context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/dsh-go/dsh/services/session"
)

// Listings of stores of different sizes at once share the pooled lookup
// tables and getdents buffers: each must still give its own store's page,
// whether its census holds or was made stale under it.
func TestConcurrentListingsShareNoPooledState(t *testing.T) {
	type store struct {
		w    *files
		want session.Page
	}
	var stores []store
	for _, n := range []int{300, 1200} {
		dir := t.TempDir()
		genStore(t, dir, n, 10)
		w := newFiles(dir)
		all := slow(t, w)
		settle(t, w)
		want, _ := session.Paginate(slices.Clone(all), session.ListOptions{Agent: "agent3", Limit: 20})
		stores = append(stores, store{w, want})
	}
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	for g := range 8 {
		s := stores[g%len(stores)]
		wg.Go(func() {
			for i := range 15 {
				if i%2 == g%2 {
					past := time.Now().Add(-time.Hour - time.Duration(i*8+g)*time.Second)
					os.Chtimes(s.w.dir, past, past) // stale the census
				}
				p, err := s.w.ListPage(stdctx.Background(), session.ListOptions{Agent: "agent3", Limit: 20})
				if err != nil {
					errc <- err
					return
				}
				if len(p.Sessions) != len(s.want.Sessions) || p.Next != s.want.Next {
					errc <- fmt.Errorf("%s: a page of %d, next %q; want %d, next %q", s.w.dir, len(p.Sessions), p.Next, len(s.want.Sessions), s.want.Next)
					return
				}
				for j := range p.Sessions {
					if p.Sessions[j].ID != s.want.Sessions[j].ID || p.Sessions[j].Agent != "agent3" {
						errc <- fmt.Errorf("%s: session %d is %q of %q; want %q", s.w.dir, j, p.Sessions[j].ID, p.Sessions[j].Agent, s.want.Sessions[j].ID)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}
