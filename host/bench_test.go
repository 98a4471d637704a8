package host_test

import (
	stdctx "context"
	"fmt"
	"strings"
	"testing"

	"github.com/dsh-go/dsh/host"
	"github.com/dsh-go/dsh/host/config"
	"github.com/hashicorp/go-hclog"
)

// hundredEntries is a config with 100 root plugin entries, each with its
// own config to decode.
func hundredEntries() []byte {
	var b strings.Builder
	b.WriteString("plugins:\n  - use: llm.scripted\n    config:\n      replies: [{text: hi}]\n")
	for i := range 99 {
		fmt.Fprintf(&b, "  - id: perm-%d\n    use: tools.permission\n    config: {deny: [bash, rm-%d]}\n", i, i)
	}
	b.WriteString("agents:\n  - id: main\n    provider: scripted\n")
	return []byte(b.String())
}

// BenchmarkDecodeAndApply100 decodes a 100-entry config and applies it:
// every plugin mounted and the agent created, then torn down.
func BenchmarkDecodeAndApply100(b *testing.B) {
	data := hundredEntries()
	opts := config.LoadOptions{Environ: []string{}}
	b.ReportAllocs()
	for b.Loop() {
		cfg, err := config.Parse("bench.yaml", data, opts)
		if err != nil {
			b.Fatal(err)
		}
		h, err := host.Start(cfg, host.Options{Logger: hclog.NewNullLogger()})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		h.Close(stdctx.Background())
		b.StartTimer()
	}
}

// BenchmarkDecode100 is the decoding alone.
func BenchmarkDecode100(b *testing.B) {
	data := hundredEntries()
	opts := config.LoadOptions{Environ: []string{}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := config.Parse("bench.yaml", data, opts); err != nil {
			b.Fatal(err)
		}
	}
}
