package sessions_test

import (
	stdctx "context"
	"testing"

	"github.com/dsh-go/dsh/services/session"
	"github.com/dsh-go/dsh/services/sessions"
)

// listingCatalog counts listings; with find set it also finds by key.
type listingCatalog struct {
	list  []session.Summary
	lists int
	finds int
}

func (c *listingCatalog) List(stdctx.Context) ([]session.Summary, error) {
	c.lists++
	return c.list, nil
}
func (c *listingCatalog) Delete(stdctx.Context, string) error { return nil }

type findingCatalog struct{ listingCatalog }

func (c *findingCatalog) Find(_ stdctx.Context, id string) (session.Summary, bool, error) {
	c.finds++
	for _, s := range c.list {
		if s.ID == id {
			return s, true, nil
		}
	}
	return session.Summary{}, false, nil
}

// Find asks a catalog that can find by key and lists nothing; one that
// cannot is scanned; no persistence is "not found", not an error.
func TestFindAsksByKeyWhereTheCatalogCan(t *testing.T) {
	stored := []session.Summary{{ID: "a", LastSeq: 7}, {ID: "b", LastSeq: 3}}
	ctx := stdctx.Background()

	byKey := &findingCatalog{listingCatalog{list: stored}}
	c := sessions.New(nil, nil, sessions.Options{Catalog: byKey})
	sum, ok, err := c.Find(ctx, "b")
	if err != nil || !ok || sum.LastSeq != 3 || byKey.lists != 0 || byKey.finds != 1 {
		t.Fatalf("Find by key: %+v %v %v; lists %d finds %d", sum, ok, err, byKey.lists, byKey.finds)
	}
	if _, ok, err := c.Find(ctx, "zz"); ok || err != nil {
		t.Fatalf("a session not stored: %v %v", ok, err)
	}

	scan := &listingCatalog{list: stored}
	c = sessions.New(nil, nil, sessions.Options{Catalog: scan})
	if sum, ok, err := c.Find(ctx, "a"); err != nil || !ok || sum.LastSeq != 7 || scan.lists != 1 {
		t.Fatalf("Find by listing: %+v %v %v (lists %d)", sum, ok, err, scan.lists)
	}

	c = sessions.New(nil, nil, sessions.Options{})
	if _, ok, err := c.Find(ctx, "a"); ok || err != nil {
		t.Fatalf("without persistence: %v %v", ok, err)
	}
}
