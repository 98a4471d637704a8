package attachments

import "github.com/dsh-go/dsh/errs"

// Error codes of the attachments service.
const (
	// TooLarge: a part or a message is over its size limit.
	TooLarge errs.Code = "ATTACHMENT_TOO_LARGE"
	// MediaMismatch: a part's bytes are not what its declared type says.
	MediaMismatch errs.Code = "ATTACHMENT_MEDIA_MISMATCH"
	// BadPart: a part is malformed (unknown type, no bytes, bad reference).
	BadPart errs.Code = "ATTACHMENT_BAD_PART"
	// NotFound: a referenced blob is not in the store.
	NotFound errs.Code = "ATTACHMENT_NOT_FOUND"
	// TooMany: a message carries more parts than attachments.max_parts.
	TooMany errs.Code = "ATTACHMENT_TOO_MANY"
	// StoreFull: storing a part would take the store past
	// attachments.max_store_bytes.
	StoreFull errs.Code = "ATTACHMENT_STORE_FULL"
	// StoreFailed: the store could not read or write its directory, or a
	// shared store could not be reached (ReasonUnreachable) or locked
	// (ReasonLockBusy): those two pass, a retry later may succeed.
	StoreFailed errs.Code = "ATTACHMENT_STORE_FAILED"
)

// Reasons that go with StoreFailed.
const (
	// ReasonUnreachable: the shared store's servers did not answer.
	ReasonUnreachable = "attachments/unreachable"
	// ReasonLockBusy: another host held the shared store's lock for the
	// whole wait.
	ReasonLockBusy = "attachments/lock-busy"
)
