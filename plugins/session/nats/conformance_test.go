package nats_test

import (
	"testing"
	"time"

	natsplugin "github.com/dsh-go/dsh/plugins/session/nats"
	"github.com/dsh-go/dsh/services/session/backendtest"
)

// pluginConfig is the plugin's config for the server at url, on a stream of its
// own.
func pluginConfig(url string) *natsplugin.Config {
	cfg := natsplugin.Config{}.Defaults()
	cfg.URL = url
	cfg.Stream = streamName()
	cfg.SubjectPrefix = "dsh.test." + cfg.Stream
	cfg.LeaseTTL = 3 * time.Second
	return &cfg
}

// TestConformance holds session.nats to what session.jsonl guarantees.
func TestConformance(t *testing.T) {
	srv := startServer(t)
	backendtest.Run(t, func(t *testing.T) backendtest.Fixture {
		cfg := pluginConfig(srv.ClientURL())
		return backendtest.Fixture{Plugin: natsplugin.Plugin, Config: func() any { c := *cfg; return &c }}
	})
}
