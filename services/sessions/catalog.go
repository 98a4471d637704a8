package sessions

import (
	stdctx "context"

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
