package sessions

import (
	stdctx "context"
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// Catalog lists and deletes persisted sessions without loading their logs,
// in the session store's own terms (session.Summary, session.State). The
// host serves it from the session store; without one, List and Delete
// report that nothing is persisted.
type Catalog interface {
	List(ctx stdctx.Context) ([]session.Summary, error)
	// Delete removes a persisted session; it refuses one open anywhere
	// with the store's SESSION_LOCKED.
	Delete(ctx stdctx.Context, sessionID string) error
}

// Finder is what a Catalog implements to find one stored session by its
// id without listing the others; without it Find scans List.
type Finder interface {
	Find(ctx stdctx.Context, sessionID string) (sum session.Summary, found bool, err error)
}

// PageCatalog is what a Catalog implements to list one page without
// describing every stored session; without it ListPage cuts List.
type PageCatalog interface {
	ListPage(ctx stdctx.Context, opts session.ListOptions) (session.Page, error)
}

// ListPage lists one page of the persisted sessions (session.ListOptions:
// one agent's, most recently updated first, after a cursor), the ones
// open in this controller marked open, as List does.
func (c *Controller) ListPage(ctx stdctx.Context, opts session.ListOptions) (session.Page, error) {
	if c.catalog == nil {
		return session.Page{}, noCatalog("list the sessions")
	}
	pc, ok := c.catalog.(PageCatalog)
	if !ok {
		list, err := c.List(ctx)
		if err != nil {
			return session.Page{}, err
		}
		return session.Paginate(list, opts)
	}
	p, err := pc.ListPage(ctx, opts)
	if err != nil {
		return session.Page{}, err
	}
	for i := range p.Sessions {
		if s, open := c.Get(p.Sessions[i].ID); open {
			p.Sessions[i].State = session.StateOpen
			p.Sessions[i].Holder = fmt.Sprintf("agent %q of this session controller", s.AgentID())
		}
	}
	return p, nil
}

// Find describes stored session id as List would; found is false when
// nothing is stored under it (or no persistence is loaded).
func (c *Controller) Find(ctx stdctx.Context, id string) (session.Summary, bool, error) {
	if f, ok := c.catalog.(Finder); ok {
		sum, found, err := f.Find(ctx, id)
		if errs.HasCode(err, session.NoPersistence) {
			return session.Summary{}, false, nil
		}
		return sum, found, err
	}
	list, err := c.List(ctx)
	if errs.HasCode(err, session.NoPersistence) {
		return session.Summary{}, false, nil
	}
	if err != nil {
		return session.Summary{}, false, err
	}
	for _, sum := range list {
		if sum.ID == id {
			return sum, true, nil
		}
	}
	return session.Summary{}, false, nil
}
