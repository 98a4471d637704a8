package jsonl_test

import (
	"testing"

	"github.com/dsh-go/dsh/plugins/session/jsonl"
	"github.com/dsh-go/dsh/services/session/backendtest"
)

// TestConformance runs the backend suite against session.jsonl, the
// reference every other backend is held to.
func TestConformance(t *testing.T) {
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture {
		dir := t.TempDir()
		return backendtest.Fixture{Plugin: jsonl.Plugin, Config: func() any { return &jsonl.Config{Dir: dir} }}
	})
}
