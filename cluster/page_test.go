package cluster_test

import (
	stdctx "context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/dsh-go/dsh/serve"
	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// TestAPageOfAnotherHostsSessionsWalksEachOnce: host a runs seven sessions
// (two of them closed since); host b, which claims nothing, is asked for
// pages of three through its cluster Service. The cursors walk every
// session exactly once, newest first, the ones open on a marked open, and
// b opens none of them. A cursor one host gave goes on on the other: both
// read the same shared store.
func TestAPageOfAnotherHostsSessionsWalksEachOnce(t *testing.T) {
	srv := startServer(t, 0)
	stream := streamName()
	a := serviceNode(t, srv, stream, "a", nodeOpts{})
	b := serviceNode(t, srv, stream, "b", nodeOpts{noOpen: true})
	var ids []string
	for i := range 7 {
		id := fmt.Sprintf("page-%d", i)
		if _, err := a.svc.Ensure(ctxT(t), sessions.EnsureOptions{OpenOptions: sessions.OpenOptions{Agent: "main", SessionID: id}}); err != nil {
			t.Fatal(err)
		}
		turn, err := a.svc.Prompt(ctxT(t), id, sessions.PromptRequest{Content: "hello " + id})
		if err != nil {
			t.Fatal(err)
		}
		if r, err := turn.Wait(ctxT(t)); err != nil || !r.Ran() {
			t.Fatalf("the turn of %s: %+v, %v", id, r, err)
		}
		ids = append(ids, id)
	}
	closed := map[string]bool{"page-1": true, "page-4": true}
	for id := range closed {
		if err := a.svc.Close(ctxT(t), id); err != nil {
			t.Fatal(err)
		}
	}

	// walk lists every page, asking on[i%len(on)] for page i.
	walk := func(t *testing.T, on ...*svcNode) (got []session.Summary, sizes []int) {
		t.Helper()
		opts := session.ListOptions{Agent: "main", Limit: 3}
		for i := 0; i < 10; i++ {
			p, err := on[i%len(on)].svc.ListPage(ctxT(t), opts)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, p.Sessions...)
			sizes = append(sizes, len(p.Sessions))
			if p.Next == "" {
				return got, sizes
			}
			opts.Cursor = p.Next
		}
		t.Fatalf("the cursors never ended: %d pages", len(sizes))
		return nil, nil
	}
	check := func(t *testing.T, got []session.Summary, sizes []int) {
		t.Helper()
		if !slices.Equal(sizes, []int{3, 3, 1}) {
			t.Fatalf("pages of %v sessions; want 3, 3, 1", sizes)
		}
		seen := map[string]int{}
		for i, s := range got {
			seen[s.ID]++
			if i > 0 && session.Newer(s, got[i-1]) {
				t.Fatalf("%s comes after %s but is newer", s.ID, got[i-1].ID)
			}
			// A close reaches the shared index a moment after it returns,
			// so only an open session is held to its state.
			if !closed[s.ID] && s.State != session.StateOpen {
				t.Fatalf("%s, open on host a, is listed %+v", s.ID, s)
			}
		}
		for _, id := range ids {
			if seen[id] != 1 {
				t.Fatalf("the walk listed %s %d times: %v", id, seen[id], seen)
			}
		}
		if len(seen) != len(ids) {
			t.Fatalf("the walk listed %v; want only %v", seen, ids)
		}
	}
	t.Run("on b", func(t *testing.T) {
		got, sizes := walk(t, b)
		check(t, got, sizes)
	})
	t.Run("from b to a", func(t *testing.T) {
		got, sizes := walk(t, b, a)
		check(t, got, sizes)
	})
	// GET /v1/sessions?limit= on host b pages through the same Service:
	// the sessions open on a are described by a (open, their last seq).
	t.Run("over b's API", func(t *testing.T) {
		srv, err := serve.New(serve.Options{Sessions: b.svc, Config: b.cfg, NoAuth: true})
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := stdctx.WithTimeout(stdctx.Background(), patience)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Error(err)
			}
		}()
		var got []session.Summary
		var sizes []int
		cursor := ""
		for i := 0; i < 10; i++ {
			req := httptest.NewRequest(http.MethodGet, "/v1/sessions?agent=main&limit=3&cursor="+url.QueryEscape(cursor), nil)
			req.Host = "127.0.0.1"
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			var page struct {
				Sessions []struct {
					ID      string    `json:"id"`
					Open    bool      `json:"open"`
					LastSeq int64     `json:"last_seq"`
					Updated time.Time `json:"updated"`
				}
				Next string
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &page); rec.Code != http.StatusOK || err != nil {
				t.Fatalf("page %d: %d %s", i, rec.Code, rec.Body)
			}
			for _, s := range page.Sessions {
				if !closed[s.ID] && (!s.Open || s.LastSeq == 0) {
					t.Fatalf("%s, open on host a, is listed by b's API as %+v", s.ID, s)
				}
				st := session.StateIdle
				if s.Open {
					st = session.StateOpen
				}
				got = append(got, session.Summary{ID: s.ID, Updated: s.Updated, State: st})
			}
			sizes = append(sizes, len(page.Sessions))
			if cursor = page.Next; cursor == "" {
				break
			}
		}
		check(t, got, sizes)
	})
	for _, id := range ids {
		if _, open := b.h.Sessions().Get(id); open {
			t.Fatalf("listing through host b opened %s there", id)
		}
	}
}
