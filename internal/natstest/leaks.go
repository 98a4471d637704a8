package natstest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// settle is how long VerifyTestMain lets goroutines end after the tests.
const settle = 15 * time.Second

// VerifyTestMain runs the tests of a package that starts NATS servers and
// fails the run if any goroutine outlives them, like goleak.VerifyTestMain,
// but waits longer for them to end: a JetStream server's file stores end
// their flush loops shortly after Shutdown and WaitForShutdown return, and
// under load that takes longer than goleak's own retries (about 1.5 s).
// Ignored are only the two loops nats-server itself leaves behind when it
// shuts down while a replicated stream is still being created (a test of
// hosts starting together on a fresh cluster does that): a file store's
// state flusher, and the access-time ticker it keeps registered. The
// server is gone by then (no listener, route or client of it remains); any
// other goroutine still there after settle is a leak.
func VerifyTestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		var err error
		for deadline := time.Now().Add(settle); ; time.Sleep(100 * time.Millisecond) {
			if err = goleak.Find(natsShutdownLeftovers...); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goroutines outlived the tests by %s: %v\n", settle, err)
			code = 1
		}
	}
	os.Exit(code)
}

var natsShutdownLeftovers = []goleak.Option{
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*fileStore).flushStreamStateLoop"),
	goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server/ats.Register.func1"),
}
