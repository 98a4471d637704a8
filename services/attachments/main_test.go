package attachments_test

import (
	"testing"

	"github.com/dsh-go/dsh/internal/natstest"
)

// The JetStream backend's tests run a NATS server: natstest's check gives
// its loops the time they take to end.
func TestMain(m *testing.M) { natstest.VerifyTestMain(m) }
