package budget_test

import (
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
)

// Every host, server and connection is closed by the test that made it;
// natstest gives a server's background loops the time they take to end.
func TestMain(m *testing.M) { natstest.VerifyTestMain(m) }
