package serve

import (
	stdctx "context"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// Finder is what a session service implements to describe one stored
// session by its id without listing the others (*sessions.Controller
// does). The server asks it whether a session that is not open is stored
// — to answer SESSION_CLOSED rather than 404, and for GET
// /v1/sessions/{id} — and falls back to scanning List without it, which
// on a cluster's store costs a read of every session.
type Finder interface {
	Find(ctx stdctx.Context, sessionID string) (sum session.Summary, found bool, err error)
}

// persisted returns the store's summary of id; found is false when none,
// or when nothing is persisted at all.
func (s *Server) persisted(ctx stdctx.Context, id string) (session.Summary, bool, error) {
	if f, ok := s.o.Sessions.(Finder); ok {
		return f.Find(ctx, id)
	}
	list, err := s.o.Sessions.List(ctx)
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
