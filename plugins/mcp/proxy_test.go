package mcp

import (
	"io"
	"net"
	"sync"
)

// proxied are the connections proxy holds, so a test can cut them all.
var proxied struct {
	mu    sync.Mutex
	conns []net.Conn
}

// proxy copies c to and from target until either side closes.
func proxy(c net.Conn, target string) {
	up, err := net.Dial("tcp", target)
	if err != nil {
		c.Close()
		return
	}
	proxied.mu.Lock()
	proxied.conns = append(proxied.conns, c, up)
	proxied.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
	c.Close()
}

// closeProxied cuts every proxied connection.
func closeProxied() {
	proxied.mu.Lock()
	defer proxied.mu.Unlock()
	for _, c := range proxied.conns {
		c.Close()
	}
	proxied.conns = nil
}
