package session

import (
	stdctx "context"

	"github.com/dsh-go/dsh/errs"
)

// Codes of session ownership.
const (
	// SessionLocked: another writer owns the session — another process
	// (reason session/other-process), or an agent of this process whose
	// driver has not stopped yet (reason session/closing) — or a writer
	// that no longer owns it tried to write (reason session/fenced), or a
	// delete met a session open in this process (reason session/open-here).
	SessionLocked errs.Code = "SESSION_LOCKED"
)

// Reasons that go with SessionLocked.
const (
	ReasonOtherProcess = "session/other-process"
	ReasonClosing      = "session/closing"
	ReasonFenced       = "session/fenced"
	// ReasonOpenHere: an agent of this process has the session open (a
	// delete was refused).
	ReasonOpenHere = "session/open-here"
)

// Lease is a writer's exclusive hold on one session. While it is held no
// other writer, in this process or another, can open the session; writes
// made for the session go through the lease that owns it, so a writer that
// lost its lease can never write into the next owner's log.
type Lease interface {
	// Release lets the session go. Later writes through the lease are
	// refused with SessionLocked, reason session/fenced.
	Release() error
}

// Holder is a Lease that can run out while its process lives: a shared
// store's lease expires when its holder stalls past its TTL, and another
// host may own the session since. Hold reports, renewing the lease first
// when it has not been lately, whether it is still held: SessionLocked
// (reason session/fenced) means it is lost for good, and the session must
// be left to its new owner; any other error means it could not be told.
type Holder interface {
	Lease
	Hold(ctx stdctx.Context) error
}

// Locker is implemented by backends that make a session's writer
// exclusive. The store takes the lease before anything of the session is
// read for a resume or written, and releases it when the session closes.
type Locker interface {
	// Lock takes the session or fails with SessionLocked naming the holder.
	Lock(ctx stdctx.Context, sessionID string) (Lease, error)
}

// StoredLocker is a Locker whose Lock makes the session exist in the store
// (session.nats writes an open record under the new lease, so a session
// opened and never prompted can be resumed elsewhere). A resume must not
// do that: it takes the lease with LockStored, which fails with NotFound —
// storing nothing and holding no lease — when nothing is stored under the
// id, so that resuming an id never stored is not mistaken for resuming an
// empty session.
type StoredLocker interface {
	Locker
	LockStored(ctx stdctx.Context, sessionID string) (Lease, error)
}
