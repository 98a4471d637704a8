//go:build !linux

package serve

import "net"

// sendQueue cannot read a socket's send queue here: a stream whose client
// stops reading is cut by its write timeout alone, without a drop message.
func sendQueue(net.Conn, int) func() (int, bool) { return nil }
