package serve

import (
	stdctx "context"

	"github.com/dsh-go/dsh/services/session"
)

// persisted returns the store's summary of id, through the service's
// index (never a scan of every log); found is false when none is stored,
// or when nothing is persisted at all.
func (s *Server) persisted(ctx stdctx.Context, id string) (session.Summary, bool, error) {
	return s.o.Sessions.Find(ctx, id)
}
