package serve_test

import (
	"os"
	"os/signal"
	"syscall"
	"testing"

	"go.uber.org/goleak"
)

// TestMain is the one of the package's test binary (the load tests share
// it): no goroutine may outlive a test. Started by the load test with
// loadFloorEnv set, the binary is the floor's bare SSE server instead.
func TestMain(m *testing.M) {
	if os.Getenv(loadFloorEnv) != "" {
		loadFloorServe()
	}
	goleak.VerifyTestMain(m)
}

func signalNotify(c chan os.Signal) { signal.Notify(c, syscall.SIGTERM, os.Interrupt) }
