package nats

import (
	"errors"

	"github.com/nats-io/nats.go/jetstream"
)

// RevisionConflict reports a key-value update or delete refused because
// the key's revision is not the one given: someone else wrote it since.
// A replicated bucket (R>1) reports that with another error code than a
// single replica does, and jetstream.ErrKeyExists matches only the
// latter; matching it alone would take a conflict on a replicated bucket
// for a failure of the server.
func RevisionConflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyExists)
}
