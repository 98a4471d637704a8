package host_test

import (
	stdctx "context"
	"fmt"
	"testing"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/dsh-go/dsh/services/agents"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkOpenAgent opens and disposes an agent through the host: spec
// resolved, built-in preset workspace-write mounted (files, bash,
// permission), provider checked. BenchmarkCreateBare is the agents
// factory alone, no presets, for the ratio.
func BenchmarkOpenAgent(b *testing.B) {
	h := benchHost(b)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		handle, err := h.OpenAgent(stdctx.Background(), host.AgentSpec{ID: fmt.Sprint("o", i), Provider: "scripted", Presets: []string{"workspace-write"}})
		if err != nil {
			b.Fatal(err)
		}
		if err := handle.Dispose(stdctx.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCreateBare(b *testing.B) {
	h := benchHost(b)
	registry, _ := agents.Key.Get(h.Root())
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		handle, err := registry.Create(stdctx.Background(), agents.CreateOptions{AgentID: fmt.Sprint("o", i), Options: agents.Options{Provider: "scripted"}})
		if err != nil {
			b.Fatal(err)
		}
		if err := handle.Dispose(stdctx.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

func benchHost(b *testing.B) *host.Host {
	cfg, err := config.Parse("b.yaml", []byte("plugins:\n  - use: llm.scripted\n"), config.LoadOptions{Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Close(stdctx.Background()) })
	return h
}
