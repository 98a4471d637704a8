package session_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// TestPaginateWalksTiesAndAgents: pages of one agent's sessions (the
// controller's "<agent>@<session>" included, "mainframe" not), newest
// first, sessions updated at the same instant ordered by id, each page
// starting right after the cursor of the one before.
func TestPaginateWalksTiesAndAgents(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	list := []session.Summary{
		{ID: "old", Agent: "main", Updated: t0},
		{ID: "b", Agent: "main@b", Updated: t0.Add(time.Minute)},
		{ID: "a", Agent: "main", Updated: t0.Add(time.Minute)},
		{ID: "other", Agent: "mainframe", Updated: t0.Add(time.Hour)},
		{ID: "new", Agent: "main", Updated: t0.Add(2 * time.Minute)},
		{ID: "never", Agent: "main"},
	}
	var ids []string
	opts := session.ListOptions{Agent: "main", Limit: 2}
	for pages := 0; ; pages++ {
		p, err := session.Paginate(append([]session.Summary(nil), list...), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range p.Sessions {
			ids = append(ids, s.ID)
		}
		if p.Next == "" {
			break
		}
		if pages > 5 {
			t.Fatal("the pages never end")
		}
		opts.Cursor = p.Next
	}
	if got := strings.Join(ids, ","); got != "new,a,b,old,never" {
		t.Fatalf("paged %s", got)
	}
	if _, err := session.Paginate(list, session.ListOptions{Cursor: "x"}); !errs.HasCode(err, errs.InvalidArgument) {
		t.Fatalf("a bad cursor: %v", err)
	}
}
