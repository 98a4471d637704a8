package serve

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/session"
)

// persisted returns the store's summary of id, through the service's
// index (never a scan of every log); found is false when none is stored,
// or when nothing is persisted at all.
func (s *Server) persisted(ctx stdctx.Context, id string) (session.Summary, bool, error) {
	if !session.ValidID(id) {
		// An id that cannot name a session names none: not found, as
		// for any other unknown id, whatever a store says of its form.
		return session.Summary{}, false, nil
	}
	return s.o.Sessions.Find(ctx, id)
}
