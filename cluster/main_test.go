package cluster_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Embedded servers, hosts and followers are all shut down and waited for
// by each test, so no goroutine of theirs is ignored.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
