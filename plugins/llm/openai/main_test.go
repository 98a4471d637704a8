package openai_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every stream, stalled and cancelled ones included, must leave nothing
// running behind it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
