package cluster

import "github.com/dsh-go/dsh/errs"

// Codes of the cluster. They are stable: a client on the other side of an
// HTTP API or of another host matches them as strings.
const (
	// Unreachable: the NATS server cannot be reached, or JetStream refused
	// to set up or serve the presence bucket.
	Unreachable errs.Code = "CLUSTER_UNREACHABLE"
	// HostIDTaken: a live host already announces this host id.
	HostIDTaken errs.Code = "CLUSTER_HOST_ID_TAKEN"
	// OwnerUnreachable: the host owning the session did not answer a
	// forwarded request. Retryable: the owner's lease expires within the
	// lease TTL if it died, and another host then claims the session.
	OwnerUnreachable errs.Code = "CLUSTER_OWNER_UNREACHABLE"
	// NoHost: nobody owns the session and no live host may claim it.
	NoHost errs.Code = "CLUSTER_NO_HOST"
	// PayloadTooLarge: a forwarded request (its attachments) is larger than
	// the NATS server's max_payload.
	PayloadTooLarge errs.Code = "CLUSTER_PAYLOAD_TOO_LARGE"
)

// Reasons that go with OwnerUnreachable.
const (
	// ReasonNoResponders: nothing listens on the owner's route subject (the
	// host stopped, or left the cluster while its sessions stayed open).
	ReasonNoResponders = "cluster/no-responders"
	// ReasonTimeout: the owner took the request but stopped answering.
	ReasonTimeout = "cluster/timeout"
	// ReasonMoved: the session changed owner again while the request was
	// forwarded, more often than a request may be forwarded.
	ReasonMoved = "cluster/owner-moved"
	// ReasonUnnamed: the session's lease names no host id: a dsh outside
	// the cluster writes it.
	ReasonUnnamed = "cluster/owner-unnamed"
	// ReasonNotOwner: the host the sender's view of the leases named owns
	// the session no longer, and nobody does. The sender reads the lease
	// and claims the session as it would have without the view
	// (leasecache.go); a client does not see it.
	ReasonNotOwner = "cluster/not-owner"
)

// FollowerClosed: the Follower was closed; the follows it ran end with
// this code.
const FollowerClosed errs.Code = "CLUSTER_FOLLOWER_CLOSED"
