package cluster

import (
	"time"
)

// HostRecord is a host's entry in the presence bucket, kept while the host
// lives: the bucket's TTL drops the entry of a host that stopped renewing
// it.
type HostRecord struct {
	HostID   string    `json:"host_id"`
	Group    string    `json:"group,omitempty"`
	Hostname string    `json:"hostname"`
	PID      int       `json:"pid"`
	Started  time.Time `json:"started"`
	// API is the address of the host's `dsh serve`, when it serves one.
	API string `json:"api,omitempty"`
}

// HostBucket is the key-value bucket of the live hosts of the cluster
// whose sessions are in stream: one key per host id.
func HostBucket(stream string) string { return stream + "_HOSTS" }

// RouteSubject is the subject a host answers forwarded requests on.
func RouteSubject(stream, hostID string) string {
	return "dsh.cluster." + stream + ".host." + hostID
}

// Options join a host to a cluster.
type Options struct {
	// URL is the NATS server, or a comma-separated list of a cluster's.
	URL string
	// CredentialsFile is a NATS .creds file; empty without
	// authentication.
	CredentialsFile string
	// Stream is session.nats's stream; the lease and presence buckets are
	// named after it.
	Stream string
	// SubjectPrefix is session.nats's subject_prefix: session S's log is
	// the subject <SubjectPrefix>.S of Stream. Empty means session.nats's
	// default.
	SubjectPrefix string
	// HostID names this host; unique among the live hosts.
	HostID string
	// Group is this host's group; ClaimGroup, when set, is the only group
	// whose hosts claim sessions nobody owns.
	Group, ClaimGroup string
	// LeaseTTL is how long the entry of a host that died stays.
	LeaseTTL time.Duration
	// ConnectTimeout bounds connecting and every JetStream request.
	ConnectTimeout time.Duration
}
