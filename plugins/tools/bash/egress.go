package bash

import "net"

// EgressServer serves the proxy listener of one sandboxed command whose
// network is {allow, deny}: an HTTP proxy (CONNECT included) that lets
// through only the domains its policy allows. Serve returns once the
// listener is closed, with every connection it accepted ended.
type EgressServer interface {
	Serve(net.Listener) error
}

// Egress makes the egress server for a policy's domain lists; nil means
// this build has none, and a config that lists domains refuses every
// command. It is set once, before any plugin is applied.
var Egress func(allow, deny []string) EgressServer
