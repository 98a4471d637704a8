package execplugin_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no goroutine outlives its test: the notification
// sender, the supervisor and the calls end when a host is closed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
