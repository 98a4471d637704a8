package attachments

import "time"

// Backend keeps blobs and reference markers; the Store adds the hold
// counts, limits and sniffing on top. Three exist: a directory (Open),
// memory (NewMemory) and, for hosts sharing sessions, a JetStream object
// store (plugins/session/nats), given to NewStore.
//
// Every method but Lock and ReadBlob is called with the backend locked.
// Errors carry this package's codes: NotFound for a blob that is not
// stored, StoreFailed for a backend that cannot be read or written.
type Backend interface {
	// Lock serialises marker and blob changes with every other process
	// sharing the store, so a blob is never removed between another
	// process's adding a reference to it and its finding it stored.
	Lock() (unlock func(), err error)
	// WriteBlob stores data under hex unless it is stored already, and
	// returns the bytes it wrote.
	WriteBlob(hex string, data []byte) (written int64, err error)
	// Usage is the bytes all blobs hold together.
	Usage() (int64, error)
	ReadBlob(hex string) ([]byte, error)
	// HasBlob fails with NotFound when hex is not stored.
	HasBlob(hex string) error
	// RemoveBlob removes hex; a blob already gone is no error.
	RemoveBlob(hex string) error
	Blobs() ([]string, error)
	// AddRef records, durably, that session references hex; false when
	// it already did.
	AddRef(hex, session string) (bool, error)
	RemoveRef(hex, session string) error
	// Refs returns the sessions referencing hex, each with whether its
	// log was seen to hold the reference.
	Refs(hex string) (map[string]bool, error)
	// SessionBlobs returns the blobs session references.
	SessionBlobs(session string) ([]string, error)
	// Verify marks session's reference of hex as seen in its log.
	Verify(hex, session string) error
	// Age is how long ago session's marker of hex was made.
	Age(hex, session string) time.Duration
	// Sweep removes what an interrupted write left behind.
	Sweep() error
}

// NewStore returns a store over b. A backend that implements io.Closer is
// closed by the store's Close.
func NewStore(b Backend, limits Limits) *Store { return newStore(b, limits) }
