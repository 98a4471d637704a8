package attachments

import "time"

// backend keeps blobs and reference markers; the Store adds the hold
// counts, limits and sniffing on top. Every method but lock and readBlob
// is called with the backend locked.
type backend interface {
	// lock serialises marker and blob changes with other processes
	// sharing the store.
	lock() (unlock func(), err error)
	writeBlob(hex string, data []byte) (written int64, err error)
	// usage is the bytes all blobs hold together.
	usage() (int64, error)
	readBlob(hex string) ([]byte, error)
	// hasBlob fails with NotFound when hex is not stored.
	hasBlob(hex string) error
	removeBlob(hex string) error
	blobs() ([]string, error)
	// addRef records that session references hex; false when it already
	// did.
	addRef(hex, session string) (bool, error)
	removeRef(hex, session string) error
	// refs returns the sessions referencing hex, each with whether its
	// log was seen to hold the reference.
	refs(hex string) (map[string]bool, error)
	verify(hex, session string) error
	// age is how long ago session's marker of hex was made.
	age(hex, session string) time.Duration
	// sweep removes what an interrupted write left behind.
	sweep() error
}
