package nats_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
	"github.com/nats-io/nats-server/v2/server"
	"go.uber.org/goleak"
)

// The embedded servers are shut down and waited for by each test, so no
// goroutine of theirs is ignored.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// startServer runs a JetStream server on a random loopback port, storing
// in a temporary directory, until the test ends.
func startServer(t *testing.T) *server.Server { return natstest.Single(t) }

var streams atomic.Int64

// streamName is a stream no other test of the run uses, so tests may share
// one server.
func streamName() string { return fmt.Sprintf("T%d", streams.Add(1)) }
