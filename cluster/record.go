package cluster

import (
	stdctx "context"
	"time"

	"github.com/dsh-go/dsh/services/sessions"
	"github.com/hashicorp/go-hclog"
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
	// Replicas is how many servers keep the presence bucket (1, 3 or 5);
	// 0 is 1.
	Replicas int

	// The fields below are Join's only.

	// Sessions is the host's session controller: forwarded requests are
	// served through it, and a claimed session is resumed in it.
	Sessions *sessions.Controller
	// Open says how to resume a session this host claims (its agent,
	// presets, workspace); KeepRunning is forced on, as nobody attaches
	// to a claimed session. Nil: this host claims no session and hands
	// unowned ones to another live host.
	Open func(sessionID string) sessions.OpenOptions
	// Claimed, when set, is called with each session this host claimed,
	// before the message that claimed it is delivered: an entry point
	// adopts it there (dsh serve answers its approvals and closes it at
	// shutdown). An error fails that message and closes the session.
	Claimed func(*sessions.Session) error
	// CloseLocal, when set, is how this host closes a session it runs
	// for a close another host forwarded (dsh serve: as its API closes
	// one); nil closes it in Sessions.
	CloseLocal func(stdctx.Context, *sessions.Session) error
	// RequestTimeout is how long a forwarded request waits for a sign of
	// life from its target (the answer, or the target's periodic "still
	// working"); 0 is 5s.
	RequestTimeout time.Duration
	// API is the address of this host's `dsh serve`, for the presence
	// record; empty when it serves none.
	API string
	// Logger receives what the cluster cannot return to a caller (a
	// failed heartbeat); nil discards.
	Logger hclog.Logger
}
