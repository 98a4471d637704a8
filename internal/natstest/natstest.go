// Package natstest runs embedded NATS JetStream servers for tests: one
// server, or a cluster of several on loopback, so code that stores in
// JetStream is tested against the real engine — replication, leader
// elections, a node going away — and never a mock of it.
//
// Every server is shut down and waited for when the test ends, so a test
// binary checked by goleak stays clean.
package natstest

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Account is the account clients of these servers use: none is configured,
// so everything lands in the global one. Per-stream queries of the servers
// take it.
const Account = server.DEFAULT_GLOBAL_ACCOUNT

// ReadyTimeout bounds every wait of the package: a server accepting
// clients, a cluster electing its JetStream leader, a stream its leader.
// A cluster forms in a second or two; the margin is for a loaded machine.
var ReadyTimeout = 30 * time.Second

// Single runs one JetStream server on a random loopback port, storing in
// a temporary directory, until the test ends.
func Single(t testing.TB) *server.Server { return SingleWith(t, nil) }

// SingleWith is Single with options of the test's own (a smaller
// max_payload, say) set by edit on the defaults.
func SingleWith(t testing.TB, edit func(*server.Options)) *server.Server {
	t.Helper()
	o := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
	}
	if edit != nil {
		edit(o)
	}
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatalf("natstest: cannot configure a NATS server: %v", err)
	}
	s.Start()
	t.Cleanup(func() { stop(s) })
	if !s.ReadyForConnections(ReadyTimeout) {
		t.Fatalf("natstest: the NATS server did not accept clients within %s", ReadyTimeout)
	}
	return s
}

// Cluster is a JetStream cluster of embedded servers on loopback. Its
// methods are meant for the test's goroutine: they fail the test when the
// cluster does not get where they wait for.
type Cluster struct {
	t     testing.TB
	name  string
	nodes []*node
}

type node struct {
	opts *server.Options
	srv  *server.Server // nil while stopped
}

var clusters atomic.Int64

// Start runs a cluster of n JetStream servers and waits until it has
// elected its meta leader and every node is current with it, so a
// replicated stream can be created at once. The servers stop when the
// test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	c := Boot(t, n)
	c.WaitReady()
	return c
}

// Boot starts a cluster of n JetStream servers and returns at once, as an
// operator's start script does: clients may reach it before it elected
// its meta leader.
func Boot(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natstest: a cluster of %d nodes; start at least one", n)
	}
	c := &Cluster{t: t, name: fmt.Sprintf("natstest-%d", clusters.Add(1))}
	// Made before the shutdown is registered, so it is removed after the
	// servers stopped writing in it: cleanups run last first.
	dir := t.TempDir()
	t.Cleanup(c.shutdown)
	ports := freePorts(t, 2*n)
	routes := make([]*url.URL, n)
	for i := range routes {
		routes[i] = &url.URL{Scheme: "nats", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[2*i+1]))}
	}
	for i := 0; i < n; i++ {
		opts := &server.Options{
			ServerName: fmt.Sprintf("%s-n%d", c.name, i),
			Host:       "127.0.0.1",
			Port:       ports[2*i],
			JetStream:  true,
			StoreDir:   filepath.Join(dir, strconv.Itoa(i)),
			NoLog:      true,
			NoSigs:     true,
		}
		// One node is a plain server: alone in a cluster, JetStream would
		// wait for a second peer to elect a leader.
		if n > 1 {
			opts.Cluster = server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: ports[2*i+1]}
			// Every node, itself included, as nats-server's own cluster
			// configs list them: the route count tells JetStream how big
			// a meta group to wait for, and a node ignores its own route.
			opts.Routes = routes
		}
		c.nodes = append(c.nodes, &node{opts: opts})
	}
	for i := range c.nodes {
		c.boot(i)
	}
	return c
}

// freePorts finds n distinct free loopback ports. A node's ports must be
// known before it starts, since every node's routes name all the others;
// between this and the servers' listens another process could take one,
// which the node's start then reports.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natstest: no free loopback port: %v", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func (c *Cluster) boot(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	// A copy: the server fills in its options as it starts, and a restart
	// must start from what the test asked for.
	opts := *nd.opts
	s, err := server.NewServer(&opts)
	if err != nil {
		c.t.Fatalf("natstest: cannot configure node %d: %v", i, err)
	}
	nd.srv = s
	s.Start()
	if !s.ReadyForConnections(ReadyTimeout) {
		c.t.Fatalf("natstest: node %d did not listen on 127.0.0.1:%d (clients) and :%d (routes) within %s; another process may have taken a port",
			i, nd.opts.Port, nd.opts.Cluster.Port, ReadyTimeout)
	}
}

func stop(s *server.Server) {
	s.Shutdown()
	s.WaitForShutdown()
}

func (c *Cluster) shutdown() {
	for _, nd := range c.nodes {
		if nd.srv != nil {
			stop(nd.srv)
			nd.srv = nil
		}
	}
}

// Len is the number of nodes, stopped ones included.
func (c *Cluster) Len() int { return len(c.nodes) }

// Node is node i's server, nil while it is stopped.
func (c *Cluster) Node(i int) *server.Server { return c.nodes[i].srv }

// URL is node i's client URL; it stays the same across a restart.
func (c *Cluster) URL(i int) string {
	return "nats://" + net.JoinHostPort(c.nodes[i].opts.Host, strconv.Itoa(c.nodes[i].opts.Port))
}

// URLs lists every node's client URL, comma-separated, as a client
// configured for the whole cluster names it.
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.nodes))
	for i := range c.nodes {
		urls[i] = c.URL(i)
	}
	return strings.Join(urls, ",")
}

// StopNode shuts node i down and waits until it is gone. The shutdown is
// orderly: the node hands over the leaderships it holds first.
func (c *Cluster) StopNode(i int) {
	c.t.Helper()
	nd := c.nodes[i]
	if nd.srv == nil {
		c.t.Fatalf("natstest: node %d is already stopped", i)
	}
	stop(nd.srv)
	nd.srv = nil
}

// RestartNode starts stopped node i again, on its ports and its store, and
// waits until the cluster counts it again and it is current with the meta
// leader. Its streams may still be catching up: WaitStreamCurrent waits for
// one.
func (c *Cluster) RestartNode(i int) {
	c.t.Helper()
	if c.nodes[i].srv != nil {
		c.t.Fatalf("natstest: node %d is running; stop it first", i)
	}
	c.boot(i)
	c.WaitReady()
}

// running lists the indexes of the nodes that are up.
func (c *Cluster) running() []int {
	var up []int
	for i, nd := range c.nodes {
		if nd.srv != nil {
			up = append(up, i)
		}
	}
	return up
}

// WaitReady waits until the running nodes have a JetStream meta leader
// that sees all of them online, and every one of them is current.
func (c *Cluster) WaitReady() {
	c.t.Helper()
	c.await("a JetStream meta leader seeing every running node", func() string {
		up := c.running()
		if len(c.nodes) == 1 {
			if len(up) == 1 && c.nodes[0].srv.JetStreamEnabled() {
				return ""
			}
			return "JetStream is not enabled"
		}
		leader := -1
		for _, i := range up {
			s := c.nodes[i].srv
			if !s.JetStreamIsCurrent() {
				return fmt.Sprintf("node %d is not current with the meta group", i)
			}
			if s.JetStreamIsLeader() {
				leader = i
			}
		}
		if leader < 0 {
			return "no meta leader"
		}
		if peers := c.nodes[leader].srv.JetStreamClusterPeers(); len(peers) != len(up) {
			return fmt.Sprintf("meta leader %d sees %d of %d running nodes online (%v)", leader, len(peers), len(up), peers)
		}
		return ""
	})
}

// StreamLeader waits for stream (of Account) to have a leader among the
// running nodes and returns its index.
func (c *Cluster) StreamLeader(stream string) int {
	c.t.Helper()
	leader := -1
	c.await("a leader of stream "+stream, func() string {
		for _, i := range c.running() {
			if c.nodes[i].srv.JetStreamIsStreamLeader(Account, stream) {
				leader = i
				return ""
			}
		}
		return "no running node leads it"
	})
	return leader
}

// MoveStreamLeader makes sure node i does not lead stream (of Account):
// if it does, it steps down, and MoveStreamLeader waits for another
// running node to take over. It returns the leader.
func (c *Cluster) MoveStreamLeader(stream string, i int) int {
	c.t.Helper()
	leader := c.StreamLeader(stream)
	if leader != i {
		return leader
	}
	if err := c.nodes[i].srv.JetStreamStepdownStream(Account, stream); err != nil {
		c.t.Fatalf("natstest: node %d cannot step down as the leader of stream %s: %v", i, stream, err)
	}
	c.await(fmt.Sprintf("a leader of stream %s other than node %d", stream, i), func() string {
		if c.nodes[i].srv.JetStreamIsStreamLeader(Account, stream) {
			return "node " + strconv.Itoa(i) + " leads it"
		}
		for _, j := range c.running() {
			if c.nodes[j].srv.JetStreamIsStreamLeader(Account, stream) {
				leader = j
				return ""
			}
		}
		return "no running node leads it"
	})
	return leader
}

// WaitStreamCurrent waits until node i's replica of stream (of Account) is
// current with the stream's leader.
func (c *Cluster) WaitStreamCurrent(i int, stream string) {
	c.t.Helper()
	c.await(fmt.Sprintf("node %d current with stream %s", i, stream), func() string {
		if s := c.nodes[i].srv; s == nil || !s.JetStreamIsStreamCurrent(Account, stream) {
			return "its replica is behind or missing"
		}
		return ""
	})
}

// await polls cond, which says what is still missing ("" when nothing
// is), until it holds or ReadyTimeout passes. The cluster's state changes
// inside the servers, with nothing to subscribe to, hence the polling.
func (c *Cluster) await(what string, cond func() string) {
	c.t.Helper()
	deadline := time.Now().Add(ReadyTimeout)
	for {
		missing := cond()
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("natstest: cluster %s waited %s for %s; still %s", c.name, ReadyTimeout, what, missing)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// JetStream connects to url for the test's own reads and writes (what a
// test checks or plants behind the code under test's back); the
// connection closes when the test ends.
func JetStream(t testing.TB, url string) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatalf("natstest: cannot connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: cannot use JetStream on %s: %v", url, err)
	}
	return js
}
