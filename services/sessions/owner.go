package sessions

import (
	stdctx "context"

	"github.com/dsh-go/dsh/errs"
	"github.com/dsh-go/dsh/services/session"
)

// Owner is the tenant session id belongs to, and whether the session
// exists (open, or stored); the tenant is empty for a session only
// operators see. The copy that is open says first; a copy opened without
// its tenant (resumed by a client that did not know it) leaves the stored
// log to say. Both are always asked, so that a missing session and a
// foreign one take the same path. An id that cannot name a session names
// none.
func Owner(ctx stdctx.Context, svc Service, id string) (tenant string, exists bool, err error) {
	if !session.ValidID(id) {
		return "", false, nil
	}
	in, ierr := svc.Info(ctx, id)
	open := ierr == nil
	sum, found, err := svc.Find(ctx, id)
	if err != nil && !errs.HasCode(err, session.NoPersistence) {
		return "", false, err
	}
	switch {
	case open && in.Tenant != "":
		return in.Tenant, true, nil
	case found:
		return sum.Tenant, true, nil
	}
	return "", open, nil
}
