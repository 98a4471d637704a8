package cluster

import (
	"fmt"

	"github.com/dsh-go/dsh/errs"
	"github.com/nats-io/nats.go"
)

// dial connects to the cluster's engine; name says who connects, in the
// server's connection list and in the error. Each part of a host (its
// membership, its followers, a status report) has its own connection, so
// closing one never cuts another's subscriptions.
func dial(o Options, name, purpose string, extra ...nats.Option) (*nats.Conn, error) {
	timeout := o.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	opts := append([]nats.Option{nats.Name(name), nats.Timeout(timeout)}, extra...)
	if o.CredentialsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredentialsFile))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, errs.Wrap(Unreachable, err, fmt.Sprintf(
			"cluster: cannot connect to the NATS server at %s %s; start it (nats-server -js) or fix cluster.nats.url and credentials_file", o.URL, purpose))
	}
	return nc, nil
}
