package nats_test

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/dsh-go/dsh/services/session"
)

// pagesThroughEveryNode: sessions written through one node of a cluster
// (replicas 3), one still open, page through the store of every node as
// the whole listing cut into pages does — the page's newest first, the
// open one open — whichever replica answers the catalog's reads.
func pagesThroughEveryNode(t *testing.T, c *natstest.Cluster) {
	cfg := clusterConfig(c.URL(0))
	root, st := mustMount(t, cfg)
	for i := range 7 {
		s := open(t, root, st, fmt.Sprintf("pg%d", i))
		appendTurn(s, 1, "w")
		if err := s.Flush(bg); err != nil {
			t.Fatal(err)
		}
		if i != 4 {
			if err := st.Close(s); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < c.Len(); i++ {
		_, r := mustMount(t, at(cfg, c.URL(i), fmt.Sprintf("reader-%d", i)))
		list, err := r.List(bg)
		if err != nil {
			t.Fatal(err)
		}
		opts := session.ListOptions{Agent: "agent", Limit: 3}
		for {
			p, err := r.ListPage(bg, opts)
			if err != nil {
				t.Fatal(err)
			}
			want, _ := session.Paginate(append([]session.Summary(nil), list...), opts)
			if got := pageIDs(p); !reflect.DeepEqual(got, pageIDs(want)) || p.Next != want.Next {
				t.Fatalf("node %d: page %v next %q, the listing's %v next %q", i, got, p.Next, pageIDs(want), want.Next)
			}
			for _, s := range p.Sessions {
				if (s.ID == "pg4") != (s.State == session.StateOpen) {
					t.Errorf("node %d: %s is %s", i, s.ID, s.State)
				}
			}
			if p.Next == "" {
				break
			}
			opts.Cursor = p.Next
		}
	}
}

func pageIDs(p session.Page) []string {
	var out []string
	for _, s := range p.Sessions {
		out = append(out, s.ID)
	}
	return out
}
