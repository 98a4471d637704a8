package nats_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
)

// Every server, host and connection is closed by the test that made it, so
// no goroutine is ignored; natstest gives a server's background loops the
// time they take to end after its shutdown.
func TestMain(m *testing.M) { natstest.VerifyTestMain(m) }

// startServer runs a JetStream server on a random loopback port, storing
// in a temporary directory, until the test ends.
func startServer(t *testing.T) *server.Server { return natstest.Single(t) }

var streams atomic.Int64

// streamName is a stream no other test of the run uses, so tests may share
// one server.
func streamName() string { return fmt.Sprintf("T%d", streams.Add(1)) }
