package serve_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain is the one of the package's test binary (the load tests share
// it): no goroutine may outlive a test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
