// Package cluster joins several dsh hosts into one over NATS JetStream:
// each host announces itself, a session's messages are routed to the host
// that owns it, and a session nobody owns is claimed by the host that
// receives a message for it.
//
// Storage and ownership are session.nats's (plugins/session/nats): the
// session logs are subjects of one stream and the owner of a session is
// the host named by its lease. This package adds what sits above them:
// presence (a key-value bucket of live hosts, each entry expiring unless
// its host renews it), routing (NATS request/reply to the owner, whose
// agent controller admits or refuses the message as it would a local one)
// and a status report of hosts, their sessions and their leases.
package cluster
